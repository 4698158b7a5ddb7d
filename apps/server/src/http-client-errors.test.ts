import { describe, expect, it } from '@jest/globals';
import type { Duplex } from 'node:stream';
import { answerClientError } from './http-client-errors.js';

/** What answerClientError uses of a socket, recording what it did. */
function fakeSocket(state: { writable?: boolean; headerSent?: boolean } = {}) {
  const written: string[] = [];
  let destroyed = false;
  const socket = {
    writable: state.writable ?? true,
    _httpMessage: state.headerSent === undefined ? undefined : { _headerSent: state.headerSent },
    write: (text: string) => written.push(text),
    destroy: () => {
      destroyed = true;
    },
  };
  return { socket: socket as unknown as Duplex, written, destroyed: () => destroyed };
}

const error = (code: string): NodeJS.ErrnoException => Object.assign(new Error(code), { code });

describe('answerClientError', () => {
  it.each([
    ['HPE_INVALID_CONTENT_LENGTH', 'HTTP/1.1 400 Bad Request', 'Malformed HTTP request.'],
    ['HPE_HEADER_OVERFLOW', 'HTTP/1.1 431 Request Header Fields Too Large', 'Request header fields are too large.'],
    ['HPE_CHUNK_EXTENSIONS_OVERFLOW', 'HTTP/1.1 413 Payload Too Large', 'Request chunk extensions are too large.'],
    ['ERR_HTTP_REQUEST_TIMEOUT', 'HTTP/1.1 408 Request Timeout', 'The request did not arrive in time.'],
  ])('answers %s with the status Node gives it and the JSON envelope, then closes', (code, statusLine, message) => {
    const s = fakeSocket();
    answerClientError(error(code), s.socket);
    expect(s.written).toHaveLength(1);
    const [head, body] = s.written[0]!.split('\r\n\r\n') as [string, string];
    expect(head.split('\r\n')).toEqual([statusLine, 'Content-Type: application/json; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close']);
    expect(JSON.parse(body)).toEqual({ error: message });
    expect(s.destroyed()).toBe(true);
  });

  it('writes nothing on a socket that cannot be written, or whose answer in flight has sent its headers, and closes it', () => {
    for (const s of [fakeSocket({ writable: false }), fakeSocket({ headerSent: true })]) {
      answerClientError(error('HPE_INVALID_METHOD'), s.socket);
      expect(s.written).toEqual([]);
      expect(s.destroyed()).toBe(true);
    }
    const notYet = fakeSocket({ headerSent: false });
    answerClientError(error('HPE_INVALID_METHOD'), notYet.socket);
    expect(notYet.written).toHaveLength(1);
  });
});

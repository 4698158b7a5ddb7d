import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { sqliteTarget, startTestServer, type TestServer } from '@ets/test-support';

interface RawAnswer {
  statusLine: string;
  headers: Record<string, string>;
  body: string;
}

/** Sends `bytes` as they are on a new connection and reads until the server closes it (at most 10 s). */
function exchange(url: string, bytes: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the server did not close the connection within 10 s'));
    }, 10_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no complete answer: ${JSON.stringify(text)}`));
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ statusLine: statusLine!, headers, body: text.slice(end + 4) });
    });
    socket.write(bytes, 'latin1');
  });
}

/**
 * A request Node's HTTP parser refuses never reaches Express; the service still answers it with
 * its JSON error envelope (spec 2.1, no code as for any validation error), with the status Node
 * gives it, and closes the connection.
 */
describe('requests the HTTP parser refuses', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(sqliteTarget);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it.each([
    ['two Content-Length headers that disagree', 'POST /execute HTTP/1.1\r\nHost: ets\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{"a":1}'],
    ['a Content-Length that is not a number', 'POST /execute HTTP/1.1\r\nHost: ets\r\nContent-Length: 7x\r\n\r\n{"a":1}'],
    ['a Content-Length beside Transfer-Encoding: chunked', 'POST /execute HTTP/1.1\r\nHost: ets\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n{"a":1}'],
    ['a request line that is not HTTP', 'HELLO\x01 there\r\n\r\n'],
  ])('answers %s with 400 and the JSON envelope, and closes the connection', async (_what, bytes) => {
    const answer = await exchange(server.url, bytes);
    expect(answer.statusLine).toBe('HTTP/1.1 400 Bad Request');
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(answer.headers.connection).toBe('close');
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.body));
    expect(JSON.parse(answer.body)).toEqual({ error: 'Malformed HTTP request.' });
  });

  it('keeps 431 for a header block too large, with the JSON envelope', async () => {
    const answer = await exchange(server.url, `GET /health HTTP/1.1\r\nHost: ets\r\nX-Large: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
    expect(answer.statusLine).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(answer.headers.connection).toBe('close');
    expect(JSON.parse(answer.body)).toEqual({ error: 'Request header fields are too large.' });
  });

  it('still answers a well-formed request on a new connection', async () => {
    const answer = await exchange(server.url, 'GET /health HTTP/1.1\r\nHost: ets\r\nConnection: close\r\n\r\n');
    expect(answer.statusLine).toBe('HTTP/1.1 200 OK');
  });
});

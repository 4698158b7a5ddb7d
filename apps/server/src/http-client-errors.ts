import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * The statuses Node's HTTP server gives a request its parser rejects or that does not arrive in
 * time; anything else it answers with 400. Kept as Node has them: only the body is ours.
 */
const ANSWERS: Record<string, { status: number; error: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, error: 'Request header fields are too large.' },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { status: 413, error: 'Request chunk extensions are too large.' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, error: 'The request did not arrive in time.' },
};
const MALFORMED = { status: 400, error: 'Malformed HTTP request.' };

/**
 * The HTTP server's `clientError` handler. A request that never reached Express (Node's parser
 * refused it: a Content-Length that disagrees with what follows, a header block too large, …) is
 * answered like every other error of the service, with the JSON envelope of spec 2.1 (no `code`,
 * as for any validation error), rather than with Node's bare status line. The connection is then
 * closed, as Node does: what follows on it cannot be parsed.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // Node's own rule: bytes written after an in-flight answer's headers would corrupt that answer.
  const inFlight = (socket as { _httpMessage?: { _headerSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?._headerSent) {
    const { status, error } = ANSWERS[err.code ?? ''] ?? MALFORMED;
    const body = JSON.stringify({ error });
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  }
  socket.destroy();
}

/**
 * A WHATWG `fetch` over the egress adapter's pinned connections (HttpsEgress.fetch), for client
 * libraries that make their own HTTP requests: the official MCP SDK's Streamable HTTP client
 * transport takes one as its `fetch` option, so every request it makes, the long-lived SSE stream
 * included, obeys every egress rule. Per request: the endpoint rules, one resolution, every
 * address checked, a TLS connection (verified against the host name) to a checked address only (a
 * kept one, when its address is among those just checked), the request on it, and the answer
 * streamed back as a `Response`. The connection is kept for another request only once the caller
 * has read the answer to its end; a redirect, an answer over the cap, an abort or a cancel close it.
 */
import http from 'node:http';
import type tls from 'node:tls';
import { readEndpoint, type EgressResult, type Endpoint, type NotSentReason, type UnknownReason } from '@ets/domain';
import type { ConnectionKey } from './connection-pool.js';

export const codeOf = (e: unknown): string => (e as { code?: string }).code ?? (e as Error).message ?? String(e);
export const hostHeader = (e: Endpoint): string => (e.port === 443 ? e.host : `${e.host}:${e.port}`);

/**
 * What went wrong with a `fetch`, and whether the request can have reached the endpoint:
 * `not-sent` (not a byte of it) or `unknown` (it was sent, or may have been). A redirect is
 * `unknown` with reason `redirect`: the endpoint received the request and answered elsewhere.
 */
export class EgressFetchError extends Error {
  override readonly name = 'EgressFetchError';
  constructor(
    readonly outcome: 'not-sent' | 'unknown',
    readonly reason: NotSentReason | UnknownReason | 'redirect' | 'aborted',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The EgressFetchError in `e` or its causes, if any (libraries wrap what `fetch` throws). */
  static in(e: unknown): EgressFetchError | undefined {
    for (let c = e, depth = 0; c instanceof Error && depth < 8; c = (c as Error & { cause?: unknown }).cause, depth++) {
      if (c instanceof EgressFetchError) return c;
    }
    return undefined;
  }
}

/** A TLS connection to a checked address; `reused`: a kept one, which served an earlier request. */
export interface PinnedConnection {
  socket: tls.TLSSocket;
  key: ConnectionKey;
  reused: boolean;
}

/** What `pinnedFetch` needs of the egress adapter. */
export interface PinnedConnector {
  open(endpoint: Endpoint, signal: AbortSignal, deadline: number): Promise<{ connection: PinnedConnection } | Extract<EgressResult, { outcome: 'not-sent' }>>;
  /** After a complete answer: the connection is kept for another request if both ends allow, else closed. */
  afterAnswer(connection: PinnedConnection, req: http.ClientRequest, res: http.IncomingMessage): void;
  connectTimeoutMs(): number;
  maxStreamBytes(): number;
}

/** Headers `fetch` sets itself: how the connection is used is the egress's business. */
const OWN_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-connection']);
/** Statuses whose answer has no body (a `Response` with one throws). */
const NULL_BODY = new Set([101, 204, 205, 304]);

export async function pinnedFetch(egress: PinnedConnector, input: string | URL, init: RequestInit): Promise<Response> {
  const reading = readEndpoint(input instanceof URL ? input.href : String(input));
  if (!reading.ok) throw new EgressFetchError('not-sent', 'endpoint', `endpoint ${reading.problem}`);
  const endpoint = reading.endpoint;
  const signal = init.signal ?? undefined;
  if (signal?.aborted) throw new EgressFetchError('not-sent', 'aborted', 'the request was aborted before it was sent');
  const body = bodyBytes(init.body);
  const method = (init.method ?? 'GET').toUpperCase();

  // Resolving and connecting under their own deadline, and the caller's signal.
  const connecting = new AbortController();
  const timeoutMs = egress.connectTimeoutMs();
  const timer = setTimeout(() => connecting.abort(), timeoutMs);
  const stop = () => connecting.abort();
  signal?.addEventListener('abort', stop, { once: true });
  let opened: Awaited<ReturnType<PinnedConnector['open']>>;
  try {
    opened = await egress.open(endpoint, connecting.signal, Date.now() + timeoutMs);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', stop);
  }
  if (!('connection' in opened)) throw new EgressFetchError('not-sent', signal?.aborted ? 'aborted' : opened.reason, opened.message);
  if (signal?.aborted) {
    opened.connection.socket.destroy();
    throw new EgressFetchError('not-sent', 'aborted', 'the request was aborted before it was sent');
  }
  return exchange(egress, opened.connection, endpoint, { method, headers: new Headers(init.headers), body }, signal, egress.maxStreamBytes());
}

function bodyBytes(body: RequestInit['body']): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(new Uint8Array(body));
  throw new EgressFetchError('not-sent', 'endpoint', 'the request body must be a string or bytes');
}

/** From here on the request may have been received: every failure is `unknown` (on a kept connection too). */
function exchange(
  egress: PinnedConnector,
  connection: PinnedConnection,
  endpoint: Endpoint,
  request: { method: string; headers: Headers; body: Buffer | undefined },
  signal: AbortSignal | undefined,
  maxBytes: number,
): Promise<Response> {
  const { socket } = connection;
  return new Promise<Response>((resolve, reject) => {
    const headers: Record<string, string> = { 'user-agent': 'ets-egress' };
    request.headers.forEach((value, name) => {
      if (!OWN_HEADERS.has(name)) headers[name] = value;
    });
    headers.host = hostHeader(endpoint);
    headers.connection = 'keep-alive';
    if (request.body !== undefined) headers['content-length'] = String(request.body.length);
    let answered = false;
    const unknown = (reason: UnknownReason | 'redirect' | 'aborted', message: string, cause?: unknown) => new EgressFetchError('unknown', reason, message, { cause });
    const req = http.request({ createConnection: () => socket, method: request.method, path: endpoint.path, headers });
    const onAbort = () => {
      const e = unknown('aborted', `the request to ${endpoint.host} was aborted`);
      req.destroy(e);
      socket.destroy();
      if (!answered) reject(e);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (e) => {
      if (answered) return;
      answered = true;
      signal?.removeEventListener('abort', onAbort);
      const code = codeOf(e);
      reject(e instanceof EgressFetchError ? e : unknown(code.startsWith('HPE_') ? 'malformed' : 'reset', `${endpoint.host}: ${code}`, e));
    });
    req.on('response', (res) => {
      answered = true;
      const status = res.statusCode ?? 0;
      const done = (complete?: http.IncomingMessage) => {
        signal?.removeEventListener('abort', onAbort);
        if (complete) egress.afterAnswer(connection, req, complete);
        else socket.destroy();
      };
      if (status >= 300 && status < 400) {
        done();
        const location = typeof res.headers.location === 'string' ? ` to ${res.headers.location.slice(0, 200)}` : '';
        return reject(unknown('redirect', `${endpoint.host} answered ${status}, a redirect${location}: redirects are never followed`));
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        done();
        return reject(unknown('too-large', `${endpoint.host} announced ${declared} bytes (cap ${maxBytes})`));
      }
      const responseHeaders = new Headers();
      for (const [name, value] of Object.entries(res.headers)) {
        for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) responseHeaders.append(name, v);
      }
      let size = 0;
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          let ended = false;
          const fail = (e: EgressFetchError) => {
            if (ended) return;
            ended = true;
            done();
            controller.error(e);
          };
          res.on('data', (chunk: Buffer) => {
            if (ended) return;
            size += chunk.length;
            if (size > maxBytes) return fail(unknown('too-large', `${endpoint.host} sent more than ${maxBytes} bytes`));
            controller.enqueue(new Uint8Array(chunk));
          });
          res.on('end', () => {
            if (ended) return;
            if (!res.complete) return fail(unknown('reset', `${endpoint.host} closed the connection before the answer was complete`));
            ended = true;
            done(res);
            controller.close();
          });
          res.on('aborted', () => fail(unknown('reset', `${endpoint.host} closed the connection before the answer was complete`)));
          res.on('error', (e) => fail(unknown('reset', `${endpoint.host}: ${codeOf(e)}`, e)));
          signal?.addEventListener('abort', () => fail(unknown('aborted', `the answer of ${endpoint.host} was aborted`)), { once: true });
        },
        cancel() {
          done();
          res.destroy();
        },
      });
      if (NULL_BODY.has(status)) void stream.cancel();
      resolve(new Response(NULL_BODY.has(status) ? null : stream, { status, statusText: res.statusMessage ?? '', headers: responseHeaders }));
    });
    req.end(request.body);
  });
}

import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { jsonBodyText, readEndpoint, type Egress, type EgressResult, type Endpoint, type EndpointCheck, type NotSentReason, type OutboundJsonRequest } from '@ets/domain';
import { AddressPolicy } from './address-policy.js';
import { DnsResolver, type HostResolver } from './resolver.js';
import { ConnectionPool, type ConnectionKey, type ConnectionPoolOptions } from './connection-pool.js';
import { codeOf, hostHeader, pinnedFetch, type PinnedConnection, type PinnedConnector } from './pinned-fetch.js';

export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
/** `fetch`'s cap on one streamed answer: an MCP tool result, or all that one SSE stream carries. */
export const DEFAULT_MAX_STREAM_BYTES = 8 * 1024 * 1024;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Connection errors after which the next checked address is tried: no connection was made, so
 * nothing can have been received (spec 4.3.8). Anything else ends the call.
 */
const NEXT_ADDRESS_ON = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'EADDRNOTAVAIL']);

/**
 * The least time a TCP connect to an address that is not the last one gets. An address that drops
 * the SYN (a dead host, a firewall) answers nothing at all; without a bound of its own it would use
 * up the whole deadline and the other checked addresses would never be tried. A second is about
 * the kernel's first SYN retransmission, so a connect that merely lost its first SYN still makes it.
 */
export const CONNECT_ATTEMPT_FLOOR_MS = 1000;

/**
 * How long one TCP connect may take (Happy Eyeballs, RFC 8305, done one at a time): an equal share
 * of what is left of the deadline among the addresses still to try, at least the floor; the last
 * address gets all that is left (no bound of its own: the deadline is its bound).
 */
export function connectAttemptMs(remainingMs: number, addressesLeft: number): number | undefined {
  if (addressesLeft <= 1) return undefined;
  return Math.min(remainingMs, Math.max(CONNECT_ATTEMPT_FLOOR_MS, Math.floor(remainingMs / addressesLeft)));
}

export interface HttpsEgressOptions {
  /** SVC_DNS_SERVERS; unset: the system resolver. */
  dnsServers?: readonly string[];
  /** SVC_EGRESS_ALLOW_CIDRS. */
  allowCidrs?: readonly string[];
  /**
   * PEM certificates trusted beside Node's bundled roots (the contents of NODE_EXTRA_CA_CERTS).
   * Node reads that setting only when the process starts; passing it here makes it hold for a
   * server started in-process, or with the setting in a `.env` file, too.
   */
  extraCaPem?: string;
  maxResponseBytes?: number;
  /** `fetch`: the longest streamed answer (bytes); default DEFAULT_MAX_STREAM_BYTES. */
  maxStreamBytes?: number;
  /** `fetch`: the deadline of resolving, connecting and TLS; default DEFAULT_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number;
  /** Tests may count lookups; production uses DnsResolver. */
  resolver?: HostResolver;
  /** Kept connections (bounds, idle time); the defaults of connection-pool.ts. */
  keepAlive?: ConnectionPoolOptions;
}

type Attempt = { kind: 'connected'; connection: PinnedConnection } | { kind: 'next'; message: string } | { kind: 'not-sent'; reason: NotSentReason; message: string };

const notSent = (reason: NotSentReason, message: string): EgressResult => ({ outcome: 'not-sent', reason, message });

/**
 * The one adapter every outbound call goes through. Per call: the endpoint's rules again, one
 * resolution of its host name, every address checked, then connections only to those addresses
 * (`net.connect` to an IP literal does no lookup of its own, so no second resolution can lead
 * elsewhere: DNS rebinding has nothing to rebind). TLS is verified against the host name (SNI and
 * certificate). An address that refuses the connection, or does not answer it within its share of
 * the deadline (`connectAttemptMs`), hands over to the next; once a TCP connection is established
 * nothing is retried (a TLS failure on it ends the call), and the request is sent on it at most
 * once. One deadline covers all of it.
 *
 * Connections are kept alive (ConnectionPool): after a complete answer a connection waits, idle,
 * for the next call to the same host, port and checked address. A call still resolves and checks
 * every address first, and takes a kept connection only to an address that this resolution has
 * just yielded and allowed; kept connections to any other address of the endpoint are closed. A
 * new connection resumes the endpoint's last TLS session when there is one. A request written on a
 * kept connection that then fails is an unknown outcome like any other, and is never sent again.
 */
export class HttpsEgress implements Egress {
  private readonly resolver: HostResolver;
  private readonly addresses: AddressPolicy;
  /** Made once: building a context from Node's ~150 root certificates costs tens of milliseconds. */
  private readonly secureContext?: tls.SecureContext;
  private readonly maxResponseBytes: number;
  private readonly maxStreamBytes: number;
  private readonly connectTimeoutMs: number;
  private readonly pool: ConnectionPool;

  constructor(options: HttpsEgressOptions = {}) {
    this.resolver = options.resolver ?? new DnsResolver(options.dnsServers);
    this.addresses = new AddressPolicy(options.allowCidrs);
    this.secureContext = options.extraCaPem ? tls.createSecureContext({ ca: [...tls.rootCertificates, options.extraCaPem], minVersion: 'TLSv1.2' }) : undefined;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.maxStreamBytes = options.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.pool = new ConnectionPool(options.keepAlive);
  }

  /** Closes the kept connections, and keeps none from now on (the service is stopping). */
  close(): void {
    this.pool.close();
  }

  /** Kept connections: how many are idle now, and how many were reused, kept, dropped so far. */
  get connections(): { idle: number; reused: number; kept: number; dropped: number } {
    return { idle: this.pool.size, ...this.pool.stats };
  }

  async check(endpoint: string, timeoutMs: number): Promise<EndpointCheck> {
    const reading = readEndpoint(endpoint);
    if (!reading.ok) return { ok: false, reason: 'endpoint', message: `endpoint ${reading.problem}` };
    return withDeadline(timeoutMs, (signal) => this.resolveChecked(reading.endpoint.host, signal));
  }

  async postJson(request: OutboundJsonRequest): Promise<EgressResult> {
    const reading = readEndpoint(request.endpoint);
    if (!reading.ok) return notSent('endpoint', `endpoint ${reading.problem}`);
    const endpoint = reading.endpoint;
    const body = Buffer.from(jsonBodyText(request.body), 'utf8');
    return withDeadline(request.timeoutMs, async (signal, deadline) => {
      const opened = await this.open(endpoint, signal, deadline);
      return 'connection' in opened ? this.exchange(opened.connection, endpoint, body, signal, request.headers) : opened;
    });
  }

  /**
   * `fetch` for a client library that speaks HTTP itself (the MCP SDK's Streamable HTTP client
   * transport): every rule of `postJson` but the deadline, which is the caller's (its `signal`);
   * resolving and connecting have one of their own (`connectTimeoutMs`). The answer streams (an SSE
   * stream stays open as long as the endpoint keeps it), capped at `maxStreamBytes`. A redirect is
   * never followed, not even by the library: it is thrown as an error. A failure throws an
   * EgressFetchError that says whether anything was sent (`not-sent`) or may have been (`unknown`).
   */
  readonly fetch = (input: string | URL, init: RequestInit = {}): Promise<Response> => pinnedFetch(this.pinned, input, init);

  private readonly pinned: PinnedConnector = {
    open: (endpoint, signal, deadline) => this.open(endpoint, signal, deadline),
    afterAnswer: (connection, req, res) => this.pool.afterAnswer(connection.key, connection.socket, req, res),
    connectTimeoutMs: () => this.connectTimeoutMs,
    maxStreamBytes: () => this.maxStreamBytes,
  };

  /**
   * Resolves, checks and connects (TLS verified): a connection pinned to a checked address, or why
   * nothing was sent. A kept connection serves only when its address is among those just checked.
   */
  private async open(endpoint: Endpoint, signal: AbortSignal, deadline: number): Promise<{ connection: PinnedConnection } | Extract<EgressResult, { outcome: 'not-sent' }>> {
    const checked = await this.resolveChecked(endpoint.host, signal);
    if (!checked.ok) {
      // The name no longer resolves, or resolves to an address not allowed: nothing kept for it serves again.
      this.pool.keepOnly(endpoint, []);
      return { outcome: 'not-sent', reason: checked.reason, message: checked.message };
    }
    this.pool.keepOnly(endpoint, checked.addresses);
    for (const address of checked.addresses) {
      const key = { host: endpoint.host, port: endpoint.port, address };
      const kept = this.pool.take(key);
      if (kept) return { connection: { socket: kept, key, reused: true } };
    }
    const refusals: string[] = [];
    for (const [i, address] of checked.addresses.entries()) {
      const limitMs = connectAttemptMs(deadline - Date.now(), checked.addresses.length - i);
      const attempt = await this.connect(address, endpoint, signal, limitMs);
      if (attempt.kind === 'connected') return { connection: attempt.connection };
      if (attempt.kind === 'not-sent') return { outcome: 'not-sent', reason: attempt.reason, message: attempt.message };
      refusals.push(attempt.message);
    }
    return { outcome: 'not-sent', reason: 'connect', message: `no address of ${endpoint.host} accepted a connection (${refusals.join('; ')})` };
  }

  private async resolveChecked(host: string, signal: AbortSignal): Promise<EndpointCheck> {
    let found: string[];
    try {
      found = await this.resolver.resolve(host, signal);
    } catch (e) {
      if (signal.aborted) return { ok: false, reason: 'timeout', message: `the deadline passed while resolving ${host}` };
      return { ok: false, reason: 'dns', message: `${host} does not resolve (${codeOf(e)})` };
    }
    // Every answer must be allowed: one bad record among good ones is how rebinding is attempted.
    for (const address of found) {
      const verdict = this.addresses.judge(address);
      if (!verdict.allowed) return { ok: false, reason: 'address', message: `${host} resolves to an address that is not public (${verdict.range})` };
    }
    return { ok: true, addresses: found };
  }

  /**
   * One address: TCP within `limitMs` (undefined: within the deadline), then TLS within the
   * deadline, resuming the last TLS session with this endpoint and address if there is one (the
   * server decides; a resumed session was verified against the same name and CAs when it was
   * made). Only a TCP connect that never completed moves on to the next address.
   */
  private connect(address: string, endpoint: Endpoint, signal: AbortSignal, limitMs: number | undefined): Promise<Attempt> {
    return new Promise<Attempt>((resolve) => {
      let secure: tls.TLSSocket | undefined;
      let settled = false;
      const key: ConnectionKey = { host: endpoint.host, port: endpoint.port, address };
      const tcp = net.connect({ host: address, port: endpoint.port, family: net.isIPv6(address) ? 6 : 4 });
      const unanswered =
        limitMs === undefined ? undefined : setTimeout(() => settle({ kind: 'next', message: `${address}: no answer to the connection within ${limitMs} ms` }), limitMs);
      const settle = (a: Attempt) => {
        if (settled) return;
        settled = true;
        clearTimeout(unanswered);
        signal.removeEventListener('abort', onAbort);
        if (a.kind !== 'connected') (secure ?? tcp).destroy();
        resolve(a);
      };
      const onAbort = () => settle({ kind: 'not-sent', reason: 'timeout', message: `the deadline passed while connecting to ${endpoint.host}` });
      signal.addEventListener('abort', onAbort, { once: true });
      tcp.on('error', (e) => {
        if (secure) return; // reported by the TLS socket
        const code = codeOf(e);
        settle(NEXT_ADDRESS_ON.has(code) ? { kind: 'next', message: `${address}: ${code}` } : { kind: 'not-sent', reason: 'connect', message: `${address}: ${code}` });
      });
      tcp.once('connect', () => {
        // Connected: from here on this address is the only one (a TLS failure is not-sent, no next).
        clearTimeout(unanswered);
        const session = this.pool.session(key);
        secure = tls.connect({ socket: tcp, servername: endpoint.host, secureContext: this.secureContext, ALPNProtocols: ['http/1.1'], minVersion: 'TLSv1.2', session });
        this.pool.watchSessions(key, secure);
        secure.on('error', (e) => {
          if (!settled && session) this.pool.forgetSession(key);
          settle({ kind: 'not-sent', reason: 'tls', message: `TLS with ${endpoint.host} failed (${codeOf(e)})` });
        });
        secure.once('secureConnect', () => settle({ kind: 'connected', connection: { socket: secure!, key, reused: false } }));
      });
    });
  }

  /**
   * From here on the request may have been received: every failure is an unknown outcome (on a
   * kept connection too: it may have died just as the request went out, after the server had it).
   * Only a complete answer lets the connection be kept; any failure closes it.
   */
  private exchange(connection: PinnedConnection, endpoint: Endpoint, body: Buffer, signal: AbortSignal, extraHeaders: Readonly<Record<string, string>> = {}): Promise<EgressResult> {
    const { socket } = connection;
    return new Promise<EgressResult>((resolve) => {
      let settled = false;
      const settle = (r: EgressResult, complete?: http.IncomingMessage) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        if (complete) this.pool.afterAnswer(connection.key, socket, req, complete);
        else socket.destroy();
        resolve(r);
      };
      const unknown = (reason: 'timeout' | 'reset' | 'too-large' | 'malformed', message: string) => settle({ outcome: 'unknown', reason, message });
      const onAbort = () => unknown('timeout', `no complete answer from ${endpoint.host} before the deadline`);
      signal.addEventListener('abort', onAbort, { once: true });
      const req = http.request({
        createConnection: () => socket,
        method: 'POST',
        path: endpoint.path,
        headers: {
          // The caller's first, so that none of the egress's own can be replaced.
          ...extraHeaders,
          host: hostHeader(endpoint),
          'content-type': 'application/json',
          'content-length': body.length,
          accept: 'application/json',
          connection: 'keep-alive',
          'user-agent': 'ets-egress',
        },
      });
      req.on('error', (e) => {
        const code = codeOf(e);
        unknown(code.startsWith('HPE_') ? 'malformed' : 'reset', `${endpoint.host}: ${code}`);
      });
      req.on('response', (res) => {
        const declared = Number(res.headers['content-length']);
        if (Number.isFinite(declared) && declared > this.maxResponseBytes) return unknown('too-large', `${endpoint.host} announced ${declared} bytes (cap ${this.maxResponseBytes})`);
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.maxResponseBytes) unknown('too-large', `${endpoint.host} sent more than ${this.maxResponseBytes} bytes`);
          else chunks.push(chunk);
        });
        res.on('aborted', () => unknown('reset', `${endpoint.host} closed the connection before the answer was complete`));
        res.on('error', (e) => unknown('reset', `${endpoint.host}: ${codeOf(e)}`));
        res.on('end', () => {
          if (!res.complete) return unknown('reset', `${endpoint.host} closed the connection before the answer was complete`);
          settle({ outcome: 'answered', status: res.statusCode ?? 0, body: parseJson(Buffer.concat(chunks).toString('utf8')) }, res);
        });
      });
      req.end(body);
    });
  }
}

function parseJson(text: string): unknown {
  try {
    return text === '' ? undefined : (JSON.parse(text) as unknown);
  } catch {
    return undefined;
  }
}

/**
 * Runs `work` under one deadline; the work sees it as an AbortSignal (and as the `Date.now()` it
 * falls at, to share out what is left) and reports it itself.
 */
async function withDeadline<T>(timeoutMs: number, work: (signal: AbortSignal, deadline: number) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const deadline = Date.now() + timeoutMs;
  const timer = setTimeout(() => controller.abort(new Error('deadline')), timeoutMs);
  try {
    return await work(controller.signal, deadline);
  } finally {
    clearTimeout(timer);
  }
}

import type http from 'node:http';
import type tls from 'node:tls';

/**
 * How long an idle connection is kept. Shorter than the shortest keep-alive timeout in common use
 * (Node's and Apache's 5 s; nginx 75 s, cloud load balancers 60 s), so that the egress closes an
 * idle connection before the server does and a request rarely meets a connection the server is
 * closing at that very moment (that request's outcome would be unknown).
 */
export const DEFAULT_IDLE_MS = 4000;
/** Idle connections kept per endpoint and checked address: about one per concurrent call. */
export const DEFAULT_MAX_IDLE_PER_ENDPOINT = 64;
/** Idle connections kept in all. */
export const DEFAULT_MAX_IDLE = 512;
/** A server's `Keep-Alive: timeout=` is honoured less this margin (the server's clock starts first). */
export const SERVER_HINT_MARGIN_MS = 1000;
/** TLS sessions remembered (one per endpoint and address), oldest forgotten first. */
const MAX_SESSIONS = 1024;

export interface ConnectionPoolOptions {
  /** Default DEFAULT_IDLE_MS; 0 keeps no connection (TLS sessions are still resumed). */
  idleMs?: number;
  maxIdlePerEndpoint?: number;
  maxIdle?: number;
}

/**
 * Where a connection leads: the host name it was made for (the Host header, the SNI and the
 * certificate's name), the port and the checked address it is pinned to. A kept connection serves
 * only a call whose own fresh resolution, every rule checked, yields that same address.
 */
export interface ConnectionKey {
  host: string;
  port: number;
  address: string;
}

const endpointOf = (k: { host: string; port: number }) => `${k.host}\u0000${k.port}`;
const keyOf = (k: ConnectionKey) => `${endpointOf(k)}\u0000${k.address}`;

interface Idle {
  socket: tls.TLSSocket;
  key: ConnectionKey;
  timer: NodeJS.Timeout;
  /** Removes the idle listeners (the socket is taken, or dropped). */
  detach(): void;
}

/**
 * The egress adapter's kept connections and TLS sessions. A connection comes back only after a
 * complete answer on a connection the server keeps open (`afterAnswer`); while idle, a close, an
 * end or an error from the peer drops it at once, and so does its idle time running out. `take`
 * hands one out at most once. Nothing here resolves or checks an address: the caller does that
 * for every call and asks only for the addresses it has just checked (`keepOnly` closes the rest).
 */
export class ConnectionPool {
  private readonly idleMs: number;
  private readonly maxIdlePerEndpoint: number;
  private readonly maxIdle: number;
  /** Per connection key, the idle connections, most recently used last. */
  private readonly idle = new Map<string, Idle[]>();
  private idleCount = 0;
  private readonly sessions = new Map<string, Buffer>();
  private closed = false;
  /** Counters for tests and metrics. */
  readonly stats = { reused: 0, kept: 0, dropped: 0 };

  constructor(options: ConnectionPoolOptions = {}) {
    this.idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
    this.maxIdlePerEndpoint = options.maxIdlePerEndpoint ?? DEFAULT_MAX_IDLE_PER_ENDPOINT;
    this.maxIdle = options.maxIdle ?? DEFAULT_MAX_IDLE;
  }

  /** How many idle connections are kept now. */
  get size(): number {
    return this.idleCount;
  }

  /** An idle connection to exactly this endpoint and address, still open; it leaves the pool. */
  take(key: ConnectionKey): tls.TLSSocket | undefined {
    const list = this.idle.get(keyOf(key));
    while (list && list.length > 0) {
      const entry = list[list.length - 1]!;
      this.forget(entry);
      const s = entry.socket;
      if (s.destroyed || !s.writable || !s.readable || s.readableEnded) {
        s.destroy();
        this.stats.dropped++;
        continue;
      }
      s.ref();
      this.stats.reused++;
      return s;
    }
    return undefined;
  }

  /**
   * Closes the idle connections to `host:port` whose address is not among `addresses` (all of
   * them when there are none): the name now resolves elsewhere, or to an address not allowed.
   */
  keepOnly(endpoint: { host: string; port: number }, addresses: readonly string[]): void {
    const prefix = `${endpointOf(endpoint)}\u0000`;
    for (const [k, list] of this.idle) {
      if (!k.startsWith(prefix) || addresses.includes(list[0]?.key.address ?? '')) continue;
      for (const entry of [...list]) this.drop(entry);
    }
  }

  /** The TLS session to resume with for a new connection to `key`, if one was kept. */
  session(key: ConnectionKey): Buffer | undefined {
    return this.sessions.get(keyOf(key));
  }

  /** Keeps the TLS sessions `socket` receives (TLS 1.3 sends its tickets after the handshake). */
  watchSessions(key: ConnectionKey, socket: tls.TLSSocket): void {
    socket.on('session', (session: Buffer) => {
      if (this.closed) return;
      const k = keyOf(key);
      this.sessions.delete(k);
      this.sessions.set(k, session);
      if (this.sessions.size > MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    });
  }

  /** A handshake that failed with a kept session: the next one starts afresh. */
  forgetSession(key: ConnectionKey): void {
    this.sessions.delete(keyOf(key));
  }

  /**
   * Called once the answer `res` to `req` was read completely and taken as the call's answer:
   * the connection is kept when both ends keep it open (HTTP/1.1 without `Connection: close`,
   * which Node's parser has already applied to `req.shouldKeepAlive`), once the request has been
   * written out completely, and when the server's `Keep-Alive: timeout=` (if any) leaves time to
   * use it. Otherwise it is closed.
   */
  afterAnswer(key: ConnectionKey, socket: tls.TLSSocket, req: http.ClientRequest, res: http.IncomingMessage): void {
    const idleMs = Math.min(this.idleMs, serverIdleMs(res));
    if (this.closed || idleMs <= 0 || !req.shouldKeepAlive || !res.complete || hasClose(res.headers.connection)) {
      socket.destroy();
      return;
    }
    // Node's client detaches itself from the socket and then emits 'free': on the next tick, or,
    // when the answer came before the request's last bytes were handed to the kernel, once they
    // are. Only then is the socket ours again.
    let freed = false;
    socket.once('free', () => {
      freed = true;
      clearTimeout(unfreed);
      this.put(key, socket, idleMs);
    });
    // The request ends ('close') just before the socket is freed; a request that failed instead, or
    // is still being written when the connection could no longer be kept anyway, closes it.
    req.once('close', () => setImmediate(() => freed || socket.destroy()));
    const unfreed = setTimeout(() => socket.destroy(), idleMs);
    unfreed.unref();
  }

  /** Closes every idle connection and keeps none from now on (the service is stopping). */
  close(): void {
    this.closed = true;
    for (const list of [...this.idle.values()]) for (const entry of [...list]) this.drop(entry);
    this.sessions.clear();
  }

  private put(key: ConnectionKey, socket: tls.TLSSocket, idleMs: number): void {
    if (this.closed || socket.destroyed || !socket.writable || !socket.readable || socket.readableEnded) {
      socket.destroy();
      return;
    }
    const k = keyOf(key);
    const list = this.idle.get(k) ?? [];
    if (list.length >= this.maxIdlePerEndpoint) {
      socket.destroy();
      return;
    }
    if (this.idleCount >= this.maxIdle) this.dropOldest();
    const onGone = () => this.drop(entry);
    const detach = () => {
      socket.removeListener('end', onGone);
      socket.removeListener('close', onGone);
      socket.removeListener('error', onGone);
      socket.removeListener('data', onGone);
    };
    const entry: Idle = { socket, key, timer: setTimeout(onGone, idleMs), detach };
    entry.timer.unref();
    // The peer closing it (FIN, close_notify, RST) or anything arriving unasked (a stray answer
    // would be taken as the next request's) drops it now, not at its next use.
    socket.once('end', onGone);
    socket.once('close', onGone);
    socket.once('error', onGone);
    socket.once('data', onGone);
    // An idle connection does not keep the process alive.
    socket.unref();
    list.push(entry);
    this.idle.set(k, list);
    this.idleCount++;
    this.stats.kept++;
  }

  private drop(entry: Idle): void {
    if (!this.forget(entry)) return;
    entry.socket.destroy();
    this.stats.dropped++;
  }

  /** Removes `entry` from the idle lists; false when it was not there (taken or dropped before). */
  private forget(entry: Idle): boolean {
    clearTimeout(entry.timer);
    entry.detach();
    const k = keyOf(entry.key);
    const list = this.idle.get(k);
    const i = list ? list.indexOf(entry) : -1;
    if (!list || i < 0) return false;
    list.splice(i, 1);
    if (list.length === 0) this.idle.delete(k);
    this.idleCount--;
    return true;
  }

  private dropOldest(): void {
    // The first list's first entry: the endpoint idle longest, roughly (Map keeps insertion order).
    const first = this.idle.values().next().value;
    if (first?.[0]) this.drop(first[0]);
  }
}

const hasClose = (value: string | undefined): boolean => value !== undefined && /(^|,)\s*close\s*(,|$)/i.test(value);

/** The server's `Keep-Alive: timeout=N` less the margin; Infinity when it names none. */
export function serverIdleMs(res: http.IncomingMessage): number {
  const hint = res.headers['keep-alive'];
  const m = typeof hint === 'string' ? /(?:^|,)\s*timeout\s*=\s*(\d+)/i.exec(hint) : null;
  return m ? Number(m[1]) * 1000 - SERVER_HINT_MARGIN_MS : Infinity;
}

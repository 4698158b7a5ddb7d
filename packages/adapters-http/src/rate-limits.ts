import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, rateLimit, type ClientRateLimitInfo, type Options as LimiterOptions, type Store } from 'express-rate-limit';
import { RedisStore, type RedisReply } from 'rate-limit-redis';
import { createClient } from 'redis';
import { DomainError, silentLogger, type Logger } from '@ets/domain';

/**
 * Rate limits of spec 8. Every limit counts over a fixed window of one minute:
 *
 * - `health`: `/health` and `/ready`, per client IP.
 * - `public`: every other public route (docs, key discovery, public verify, handbook), per IP.
 * - `execute`: `POST /execute`, per authenticated caller id; mounted after authentication, and
 *   only when authentication is enabled (the composition root decides).
 * - `authFailure`: requests that end in 401, per IP; mounted before authentication on every keyed
 *   route, so an IP that is locked out gets 429 without its key being checked (or audited).
 *
 * A refused request reaches no handler: the limiter passes a `rate_limited` DomainError to the
 * central error handler (429, `{"error":"Rate limit exceeded. Try again later.","code":"RATE_LIMITED"}`)
 * after setting `Retry-After` (seconds until the client's window ends).
 *
 * Counts live in this process (the spec's default: with several instances the effective ceiling
 * is the limit times the number of instances), or in Redis (`SVC_REDIS_URL`) so that every
 * instance shares them. When Redis cannot be reached the limiter does not fail closed (which
 * would turn a Redis outage into an API outage) and does not simply stop limiting either: it logs
 * one warning and counts in this process until Redis answers again, then logs that it is back.
 */

export const RATE_LIMIT_WINDOW_MS = 60_000;
export const RATE_LIMITED_MESSAGE = 'Rate limit exceeded. Try again later.';
export const DEFAULT_REDIS_PREFIX = 'ets:rl:';
/** A Redis command slower than this is treated as a failure (the request is counted locally). */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;

export type LimiterStoreOption = 'memory' | { redisUrl: string; /** Key prefix; each limiter adds `<name>:`. */ prefix?: string };

export interface RateLimitOptions {
  executePerMinute: number;
  healthPerMinute: number;
  authFailurePerMinute: number;
  publicPerMinute: number;
  /** Default `'memory'` (per process). */
  store?: LimiterStoreOption;
  /** Milliseconds since the epoch; the in-memory windows and `Retry-After` follow it (tests). */
  now?: () => number;
  /** Store outages and limiter misconfigurations are logged here (never a URL or a key). */
  logger?: Logger;
}

export interface RateLimiters {
  /** For `createHttpApp({ limiters })`: applied first on public routes. */
  limiters: { health: RequestHandler; public: RequestHandler };
  /** For `createHttpApp({ callerLimiters })`: applied after authentication, keyed by caller. */
  callerLimiters: { execute: RequestHandler };
  /** For `createHttpApp({ authFailure })`: applied before authentication on keyed routes. */
  authFailure: RequestHandler;
  /** Resolves once the shared store is connected and usable (at once for the memory store). */
  ready(): Promise<void>;
  /** Closes the Redis connection, if any. Call on shutdown. */
  close(): Promise<void>;
}

type StoreName = 'health' | 'public' | 'execute' | 'auth-failure';

export function createRateLimiters(options: RateLimitOptions): RateLimiters {
  const now = options.now ?? Date.now;
  const logger = options.logger ?? silentLogger;
  const shared = options.store && options.store !== 'memory' ? new SharedRedis(options.store, logger) : undefined;
  const storeFor = (name: StoreName): Store => {
    const local = new WindowMemoryStore(now);
    return shared ? shared.store(name, local) : local;
  };
  const refuse = refusal(now);
  const libraryLogger = { warn: (e: unknown, m?: string) => logger.warn({ err: describe(e) }, m), error: (e: unknown, m?: string) => logger.warn({ err: describe(e) }, m) };

  const limiter = (name: StoreName, limit: number, keyGenerator: (req: Request, res: Response) => string): RequestHandler =>
    rateLimit({
      windowMs: RATE_LIMIT_WINDOW_MS,
      limit,
      keyGenerator,
      store: storeFor(name),
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      // The stores here never throw (a failing Redis falls back to local counts); should one,
      // the request is let through rather than refused.
      passOnStoreError: true,
      logger: libraryLogger,
      handler: (req, res, next) => refuse(res, next, (req as Request & { rateLimit?: ClientRateLimitInfo }).rateLimit?.resetTime),
    });

  return {
    limiters: {
      health: limiter('health', options.healthPerMinute, clientIpKey),
      public: limiter('public', options.publicPerMinute, clientIpKey),
    },
    callerLimiters: { execute: limiter('execute', options.executePerMinute, callerKey) },
    authFailure: authFailureLimiter(storeFor('auth-failure'), options.authFailurePerMinute, refuse, logger),
    ready: () => shared?.ready() ?? Promise.resolve(),
    close: () => shared?.close() ?? Promise.resolve(),
  };
}

/** The client's IP; IPv6 addresses are grouped by their /56, as express-rate-limit recommends. */
export function clientIpKey(req: Request): string {
  return ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown');
}

/** The authenticated caller (`res.locals.caller`); the IP only if the limiter is mis-mounted. */
export function callerKey(req: Request, res: Response): string {
  const callerId = (res.locals.caller as { callerId?: unknown } | undefined)?.callerId;
  return typeof callerId === 'string' ? `caller:${callerId}` : `ip:${clientIpKey(req)}`;
}

type Refuse = (res: Response, next: NextFunction, resetTime: Date | undefined) => void;

function refusal(now: () => number): Refuse {
  return (res, next, resetTime) => {
    const seconds = resetTime ? Math.ceil((resetTime.getTime() - now()) / 1000) : RATE_LIMIT_WINDOW_MS / 1000;
    res.setHeader('Retry-After', String(Math.max(1, seconds)));
    next(new DomainError('rate_limited', RATE_LIMITED_MESSAGE, 'RATE_LIMITED'));
  };
}

/**
 * Counts only requests that end in 401, and refuses an IP that has used its budget before
 * authentication runs. Unlike express-rate-limit's `skipSuccessfulRequests` (which counts every
 * request while it is in flight and takes successful ones back when they finish), a caller with
 * many concurrent, correctly authenticated requests is never refused here.
 */
function authFailureLimiter(store: Store, limit: number, refuse: Refuse, logger: Logger): RequestHandler {
  void Promise.resolve(store.init?.({ windowMs: RATE_LIMIT_WINDOW_MS } as LimiterOptions)).catch(() => undefined);
  return async (req, res, next) => {
    const key = clientIpKey(req);
    let info: ClientRateLimitInfo | undefined;
    try {
      info = await store.get?.(key);
    } catch (e) {
      logger.warn({ err: describe(e) }, 'auth-failure rate limit: store failed, request let through');
    }
    if (info && info.totalHits >= limit) return refuse(res, next, info.resetTime);
    res.once('finish', () => {
      if (res.statusCode !== 401) return;
      Promise.resolve(store.increment(key)).catch((e: unknown) =>
        logger.warn({ err: describe(e) }, 'auth-failure rate limit: store failed, failure not counted'),
      );
    });
    next();
  };
}

/**
 * Fixed-window counts in this process, on an injectable clock. Expired windows are dropped at
 * most once per window, on a write, so no timer keeps the process alive.
 */
export class WindowMemoryStore implements Store {
  readonly localKeys = true;
  private windowMs = RATE_LIMIT_WINDOW_MS;
  private readonly windows = new Map<string, { totalHits: number; resetAt: number }>();
  private nextSweep = 0;

  constructor(private readonly now: () => number = Date.now) {}

  init(options: LimiterOptions): void {
    this.windowMs = options.windowMs;
  }

  get(key: string): ClientRateLimitInfo | undefined {
    const w = this.live(key);
    return w && { totalHits: w.totalHits, resetTime: new Date(w.resetAt) };
  }

  increment(key: string): ClientRateLimitInfo {
    this.sweep();
    let w = this.live(key);
    if (!w) {
      w = { totalHits: 0, resetAt: this.now() + this.windowMs };
      this.windows.set(key, w);
    }
    w.totalHits += 1;
    return { totalHits: w.totalHits, resetTime: new Date(w.resetAt) };
  }

  decrement(key: string): void {
    const w = this.live(key);
    if (w && w.totalHits > 0) w.totalHits -= 1;
  }

  resetKey(key: string): void {
    this.windows.delete(key);
  }

  resetAll(): void {
    this.windows.clear();
  }

  private live(key: string) {
    const w = this.windows.get(key);
    if (w && w.resetAt <= this.now()) {
      this.windows.delete(key);
      return undefined;
    }
    return w;
  }

  private sweep(): void {
    const t = this.now();
    if (t < this.nextSweep) return;
    this.nextSweep = t + this.windowMs;
    for (const [key, w] of this.windows) if (w.resetAt <= t) this.windows.delete(key);
  }
}

type RedisClient = ReturnType<typeof createClient>;

/** How soon a connected but failing Redis is tried again. */
const RECOVERY_DELAY_MS = 2000;

/**
 * One Redis connection shared by every limiter (each with its own key prefix). It reconnects
 * forever with a capped back-off. Redis is used only while it is connected and the stores' scripts
 * are loaded; after any failure each limiter counts in its local store until a (re)connection or a
 * retry a moment later succeeds. The state changes are logged once each way; the URL (which may
 * carry a password) never is.
 */
class SharedRedis {
  private readonly client: RedisClient;
  private readonly stores: FallbackStore[] = [];
  private healthy = false;
  private warned = false;
  private closed = false;
  private recovering = false;
  private retryTimer?: NodeJS.Timeout;
  private readonly firstHealthy: Promise<void>;
  private resolveFirstHealthy!: () => void;

  constructor(
    private readonly options: { redisUrl: string; prefix?: string },
    private readonly logger: Logger,
  ) {
    this.firstHealthy = new Promise((resolve) => (this.resolveFirstHealthy = resolve));
    this.client = createClient({
      url: options.redisUrl,
      // Fail fast instead of queueing while disconnected: a queued command would hold the request.
      disableOfflineQueue: true,
      socket: { connectTimeout: 5000, reconnectStrategy: (retries) => Math.min(2 ** retries * 50, 5000) + Math.floor(Math.random() * 200) },
    });
    // Without an 'error' listener node-redis would crash the process on a connection error.
    this.client.on('error', (e: unknown) => this.failed(e));
    this.client.on('ready', () => void this.recover());
    this.client.connect().catch((e: unknown) => this.failed(e));
  }

  store(name: StoreName, local: Store): Store {
    const prefix = `${this.options.prefix ?? DEFAULT_REDIS_PREFIX}${name}:`;
    const redisStore = new RedisStore({
      prefix,
      // node-redis's own `timeout` option stops counting once a command is written, so a hung
      // server would hold the request: bound the whole round trip here.
      sendCommand: (...args: string[]) => withTimeout(this.client.sendCommand<RedisReply>(args), REDIS_COMMAND_TIMEOUT_MS),
    });
    const s = new FallbackStore(redisStore, local, () => this.healthy && this.client.isReady, (e) => this.failed(e));
    this.stores.push(s);
    return s;
  }

  ready(): Promise<void> {
    return this.firstHealthy;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.healthy = false;
    clearTimeout(this.retryTimer);
    if (this.client.isReady) await this.client.close().catch(() => this.client.destroy());
    else if (this.client.isOpen) this.client.destroy();
  }

  private failed(e: unknown): void {
    this.healthy = false;
    if (this.closed) return;
    if (!this.warned) {
      this.warned = true;
      this.logger.warn({ err: describe(e) }, 'rate-limit store (Redis) unavailable; counting per instance until it is back');
    }
    // Disconnected: the client reconnects and 'ready' recovers. Connected but failing: retry soon.
    if (this.client.isReady) this.scheduleRecovery();
  }

  private scheduleRecovery(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.recover();
    }, RECOVERY_DELAY_MS);
    this.retryTimer.unref();
  }

  /** (Re)load the stores' scripts: on every (re)connection (a restarted Redis has none) and after failures. */
  private async recover(): Promise<void> {
    if (this.closed || this.recovering || !this.client.isReady) return;
    this.recovering = true;
    try {
      await Promise.all(this.stores.map((s) => s.reinit()));
      this.healthy = true;
      if (this.warned) this.logger.info({}, 'rate-limit store (Redis) is reachable again; counts are shared');
      this.warned = false;
      this.resolveFirstHealthy();
    } catch (e) {
      this.failed(e);
    } finally {
      this.recovering = false;
    }
  }
}

/** Redis while it is up; the local store while it is not, and for any command that fails. */
class FallbackStore implements Store {
  readonly localKeys = false;
  readonly prefix: string;
  private options?: LimiterOptions;

  constructor(
    private readonly shared: RedisStore,
    private readonly local: Store,
    private readonly isUp: () => boolean,
    private readonly onFailure: (e: unknown) => void,
  ) {
    this.prefix = shared.prefix;
  }

  init(options: LimiterOptions): void {
    this.options = options;
    void this.local.init?.(options);
    // Scripts are loaded when the client is ready (reinit); until then the local store counts.
    this.shared.windowMs = options.windowMs;
  }

  async reinit(): Promise<void> {
    if (this.options) await this.shared.init(this.options);
  }

  get(key: string): Promise<ClientRateLimitInfo | undefined> {
    return this.attempt(
      () => this.shared.get(key),
      () => this.local.get?.(key),
    );
  }

  increment(key: string): Promise<ClientRateLimitInfo> {
    return this.attempt(
      () => this.shared.increment(key),
      () => this.local.increment(key),
    );
  }

  decrement(key: string): Promise<void> {
    return this.attempt(
      () => this.shared.decrement(key),
      () => this.local.decrement(key),
    );
  }

  resetKey(key: string): Promise<void> {
    return this.attempt(
      () => this.shared.resetKey(key),
      () => this.local.resetKey(key),
    );
  }

  private async attempt<T>(onShared: () => Promise<T>, onLocal: () => T | Promise<T>): Promise<T> {
    if (this.isUp()) {
      try {
        return await onShared();
      } catch (e) {
        this.onFailure(e);
      }
    }
    return onLocal();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Name and message of an error (never a stack, never the configured URL). */
function describe(e: unknown): object {
  if (e !== null && typeof e === 'object' && 'message' in e) {
    const { name, message } = e as { name?: unknown; message: unknown };
    return { name: String(name ?? 'Error'), message: String(message) };
  }
  return { value: String(e) };
}

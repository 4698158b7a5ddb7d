import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, rateLimit, type ClientRateLimitInfo, type Options as LimiterOptions, type Store } from 'express-rate-limit';
import { RedisStore, type RedisReply } from 'rate-limit-redis';
import { createClient } from 'redis';
import { DomainError, silentLogger, type Logger } from '@ets/domain';
import type { FailedAuthenticationLimit } from './middleware/authenticate.js';

/**
 * Rate limits of spec 8. Every limit counts over a fixed window of one minute:
 *
 * - `health`: `/health` and `/ready`, per client IP.
 * - `public`: every other public route (docs, key discovery, public verify, handbook), per IP.
 * - `execute`: `POST /execute`, per authenticated caller id; mounted after authentication, and
 *   only when authentication is enabled (the composition root decides).
 * - `authFailure`: failed authentications, per IP; authentication counts a request only once its
 *   key has failed, so a valid key is never refused, and answers a failure over the limit with 429
 *   instead of 401 (neither signed nor stored).
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
  /** Told about every refusal (metrics), by limiter name. */
  onRefusal?(limiter: LimiterStoreName): void;
}

/** Whether the shared store (Redis) is in use now: `UP`, or `DOWN` while each instance counts on its own. */
export type SharedStoreState = 'UP' | 'DOWN';

export interface RateLimiters {
  /** For `createHttpApp({ limiters })`: applied first on public routes. */
  limiters: { health: RequestHandler; public: RequestHandler };
  /** For `createHttpApp({ callerLimiters })`: applied after authentication, keyed by caller. */
  callerLimiters: { execute: RequestHandler };
  /** For `bearerAuthentication({ failureLimit })`: counts failed authentications. */
  authFailure: FailedAuthenticationLimit;
  /** Resolves once the shared store is connected and usable (at once for the memory store). */
  ready(): Promise<void>;
  /** Closes the Redis connection, if any. Call on shutdown. */
  close(): Promise<void>;
  /** The shared store's state; undefined when the counts are per process by configuration. */
  sharedStoreState(): SharedStoreState | undefined;
}

export const LIMITER_STORE_NAMES = ['health', 'public', 'execute', 'auth-failure'] as const;
export type LimiterStoreName = (typeof LIMITER_STORE_NAMES)[number];

export function createRateLimiters(options: RateLimitOptions): RateLimiters {
  const now = options.now ?? Date.now;
  const logger = options.logger ?? silentLogger;
  const shared = options.store && options.store !== 'memory' ? new SharedRedis(options.store, logger) : undefined;
  const storeFor = (name: LimiterStoreName): Store => {
    const local = new WindowMemoryStore(now);
    return shared ? shared.store(name, local) : local;
  };
  const refusalOf = (name: LimiterStoreName): Refusal => {
    const refuse = rateLimited(now);
    return (res, resetTime) => {
      options.onRefusal?.(name);
      return refuse(res, resetTime);
    };
  };
  const libraryLogger = { warn: (e: unknown, m?: string) => logger.warn({ err: describe(e) }, m), error: (e: unknown, m?: string) => logger.warn({ err: describe(e) }, m) };

  const limiter = (name: LimiterStoreName, limit: number, keyGenerator: (req: Request, res: Response) => string): RequestHandler => {
    const refusal = refusalOf(name);
    return rateLimit({
      windowMs: RATE_LIMIT_WINDOW_MS,
      limit,
      keyGenerator,
      store: storeFor(name),
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      // The stores here never throw (a failing Redis falls back to local counts); should one,
      // the request is let through rather than refused.
      passOnStoreError: true,
      // `/mcp` counts each `tools/call` of a message (RouteOptions.limitedBody): more than one count per request is meant.
      validate: { singleCount: false },
      logger: libraryLogger,
      handler: (req, res, next) => next(refusal(res, (req as Request & { rateLimit?: ClientRateLimitInfo }).rateLimit?.resetTime)),
    });
  };

  return {
    limiters: {
      health: limiter('health', options.healthPerMinute, clientIpKey),
      public: limiter('public', options.publicPerMinute, clientIpKey),
    },
    callerLimiters: { execute: limiter('execute', options.executePerMinute, callerKey) },
    authFailure: failedAuthenticationLimit(storeFor('auth-failure'), options.authFailurePerMinute, refusalOf('auth-failure'), logger),
    ready: () => shared?.ready() ?? Promise.resolve(),
    close: () => shared?.close() ?? Promise.resolve(),
    sharedStoreState: () => shared?.state(),
  };
}

/** The client's IP; IPv6 addresses are grouped by their /56, as express-rate-limit recommends. */
export function clientIpKey(req: Request): string {
  return ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown');
}

/**
 * The authenticated caller (`res.locals.caller`); the IP for a caller nobody authenticated (the
 * simple profile without SVC_API_KEY) and if the limiter is mis-mounted.
 */
export function callerKey(req: Request, res: Response): string {
  const caller = res.locals.caller as { callerId?: unknown; unauthenticated?: boolean } | undefined;
  return typeof caller?.callerId === 'string' && caller.unauthenticated !== true ? `caller:${caller.callerId}` : `ip:${clientIpKey(req)}`;
}

/** Sets `Retry-After` (seconds until the window ends) and returns the 429 to answer. */
type Refusal = (res: Response, resetTime: Date | undefined) => DomainError;

function rateLimited(now: () => number): Refusal {
  return (res, resetTime) => {
    const seconds = resetTime ? Math.ceil((resetTime.getTime() - now()) / 1000) : RATE_LIMIT_WINDOW_MS / 1000;
    res.setHeader('Retry-After', String(Math.max(1, seconds)));
    return new DomainError('rate_limited', RATE_LIMITED_MESSAGE, 'RATE_LIMITED');
  };
}

/**
 * Counts only failed authentications, and only after the key has failed: unlike a limiter in front
 * of authentication, it never refuses a valid key, however many failures came from its address.
 * The count is taken by the increment itself (synchronously in this process, `INCR` in Redis), so
 * that concurrent failures cannot all read a count under the limit: at most `limit` failures per
 * address and window are answered 401 (and audited), across every instance sharing the store.
 */
function failedAuthenticationLimit(store: Store, limit: number, refusal: Refusal, logger: Logger): FailedAuthenticationLimit {
  void Promise.resolve(store.init?.({ windowMs: RATE_LIMIT_WINDOW_MS } as LimiterOptions)).catch(() => undefined);
  return {
    async countFailure(req, res) {
      let info: ClientRateLimitInfo;
      try {
        info = await store.increment(clientIpKey(req));
      } catch (e) {
        logger.warn({ err: describe(e) }, 'auth-failure rate limit: store failed, failure not counted');
        return undefined;
      }
      return info.totalHits > limit ? refusal(res, info.resetTime) : undefined;
    },
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

  store(name: LimiterStoreName, local: Store): Store {
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

  state(): SharedStoreState {
    return this.healthy && this.client.isReady ? 'UP' : 'DOWN';
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

import path from 'node:path';

/**
 * Every setting of the contract's table (plus a few operational ones), read and validated once at
 * start. A bad value stops the start with one line naming the setting and what it accepts.
 */
export type Profile = 'transaction' | 'attestation' | 'attestation-simple';
export type SigningMode = 'ed25519' | 'hybrid';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'silent';

export interface Settings {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl?: string;
  apiKeysFile: string;
  apiKeysInline?: string;
  authDisabled: boolean;
  profile: Profile;
  simpleApiKey?: string;
  sandbox: boolean;
  signingMode: SigningMode;
  redisUrl?: string;
  rateLimits: {
    executePerMinute: number;
    healthPerMinute: number;
    authFailurePerMinute: number;
    publicPerMinute: number;
  };
  bodyLimitBytes: number;
  logLevel: LogLevel;
  policiesDir?: string;
  shutdownTimeoutMs: number;
  /** Express `trust proxy`: false, true, or the number of proxy hops in front of the service. */
  trustProxy: boolean | number;
}

/** Defaults, documented in the README's settings table and the OpenAPI description. */
export const DEFAULTS = {
  host: '127.0.0.1',
  port: 8080,
  dataDir: './data',
  executePerMinute: 6000,
  healthPerMinute: 12000,
  authFailurePerMinute: 30,
  publicPerMinute: 600,
  bodyLimitBytes: 1024 * 1024,
  logLevel: 'info' as LogLevel,
  shutdownTimeoutMs: 10000,
} as const;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

const present = (env: Env, name: string): string | undefined => {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
};

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = present(env, name);
  if (v === undefined) return fallback;
  if ((allowed as readonly string[]).includes(v)) return v as T;
  throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(v)}: accepted values are ${allowed.join(', ')}.`);
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const v = present(env, name);
  if (v === undefined) return fallback;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(v)}: accepted values are true, false.`);
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = present(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(v)}: accepted values are whole numbers from ${min} to ${max}.`);
  }
  return Number(v);
}

function byteSize(env: Env, name: string, fallback: number): number {
  const v = present(env, name);
  if (v === undefined) return fallback;
  const m = /^(\d+)\s*(b|kb|mb)?$/i.exec(v);
  const units: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };
  const bytes = m ? Number(m[1]) * units[(m[2] ?? 'b').toLowerCase()]! : NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1024 || bytes > 64 * 1024 * 1024) {
    throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(v)}: accepted values are sizes from 1kb to 64mb (e.g. 1048576, 512kb, 1mb).`);
  }
  return bytes;
}

function url(env: Env, name: string, schemes: readonly string[]): string | undefined {
  const v = present(env, name);
  if (v === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(v);
  } catch {
    parsed = undefined;
  }
  if (!parsed || !schemes.includes(parsed.protocol.replace(/:$/, ''))) {
    // Never echo the value: a database URL may hold a password.
    throw new ConfigError(`Invalid setting ${name}: accepted values are URLs with scheme ${schemes.map((s) => `${s}://`).join(' or ')}.`);
  }
  return v;
}

function trustProxy(env: Env): boolean | number {
  const v = present(env, 'SVC_TRUST_PROXY');
  if (v === undefined || v === 'false') return false;
  if (v === 'true') return true;
  if (/^\d{1,2}$/.test(v)) return Number(v);
  throw new ConfigError(`Invalid setting SVC_TRUST_PROXY=${JSON.stringify(v)}: accepted values are false, true, or a number of proxy hops (0-99).`);
}

export function loadSettings(env: Env = process.env, cwd: string = process.cwd()): Settings {
  const dataDir = path.resolve(cwd, present(env, 'SVC_DATA_DIR') ?? DEFAULTS.dataDir);
  const host = present(env, 'SVC_HOST') ?? DEFAULTS.host;
  if (!/^[A-Za-z0-9.:\-[\]]+$/.test(host)) {
    throw new ConfigError(`Invalid setting SVC_HOST=${JSON.stringify(host)}: accepted values are a host name or IP address.`);
  }
  const apiKeysInline = present(env, 'SVC_API_KEYS');
  if (apiKeysInline !== undefined) {
    try {
      const parsed: unknown = JSON.parse(apiKeysInline);
      if (!Array.isArray(parsed)) throw new Error('not an array');
    } catch {
      throw new ConfigError('Invalid setting SVC_API_KEYS: accepted values are a JSON array of key records (see README, "API keys").');
    }
  }
  return {
    host,
    port: int(env, 'SVC_PORT', DEFAULTS.port, 0, 65535),
    dataDir,
    databaseUrl: url(env, 'SVC_DATABASE_URL', ['postgres', 'postgresql']),
    apiKeysFile: path.resolve(cwd, present(env, 'SVC_API_KEYS_FILE') ?? path.join(dataDir, 'api-keys.json')),
    apiKeysInline,
    authDisabled: bool(env, 'SVC_AUTH_DISABLED', false),
    profile: oneOf(env, 'SVC_PROFILE', ['transaction', 'attestation', 'attestation-simple'] as const, 'transaction'),
    simpleApiKey: present(env, 'SVC_API_KEY'),
    sandbox: bool(env, 'SVC_SANDBOX', false),
    signingMode: oneOf(env, 'SVC_SIGNING_MODE', ['ed25519', 'hybrid'] as const, 'ed25519'),
    redisUrl: url(env, 'SVC_REDIS_URL', ['redis', 'rediss']),
    rateLimits: {
      executePerMinute: int(env, 'RATE_LIMIT_EXECUTE_PER_MINUTE', DEFAULTS.executePerMinute, 1, 10_000_000),
      healthPerMinute: int(env, 'RATE_LIMIT_HEALTH_PER_MINUTE', DEFAULTS.healthPerMinute, 1, 10_000_000),
      authFailurePerMinute: int(env, 'RATE_LIMIT_AUTH_FAILURE_PER_MINUTE', DEFAULTS.authFailurePerMinute, 1, 10_000_000),
      publicPerMinute: int(env, 'RATE_LIMIT_PUBLIC_PER_MINUTE', DEFAULTS.publicPerMinute, 1, 10_000_000),
    },
    bodyLimitBytes: byteSize(env, 'SVC_BODY_LIMIT', DEFAULTS.bodyLimitBytes),
    logLevel: oneOf(env, 'SVC_LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'silent'] as const, DEFAULTS.logLevel),
    policiesDir: present(env, 'SVC_POLICIES_DIR') ? path.resolve(cwd, present(env, 'SVC_POLICIES_DIR')!) : undefined,
    shutdownTimeoutMs: int(env, 'SVC_SHUTDOWN_TIMEOUT_MS', DEFAULTS.shutdownTimeoutMs, 0, 600_000),
    trustProxy: trustProxy(env),
  };
}

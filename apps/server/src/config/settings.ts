import { readFileSync } from 'node:fs';
import path from 'node:path';
// The light entry points: every `ets` command reads the settings (see adapters-connectors' settings.ts).
import { parseCidr, parseDnsServers, readStdioServersFile, type StdioServerSpec } from '@ets/adapters-connectors/settings';
import { readWebhookSecret } from '@ets/adapters-crypto/webhook-signer';
import { readEndpoint } from '@ets/domain';

/**
 * Every setting of the contract's table (plus a few operational ones), read and validated once at
 * start. A bad value stops the start with one line naming the setting and what it accepts.
 */
export type Profile = 'transaction' | 'attestation' | 'attestation-simple';
export type SigningMode = 'ed25519' | 'hybrid';
export type SigningProvider = 'disk' | 'env' | 'pkcs11';

/** CONTRACT "Signing key providers". Secrets (PEMs, PIN) live here and are never logged. */
export type SigningProviderSettings =
  | { kind: 'disk' }
  | { kind: 'env'; ed25519Pem?: string; mlDsa65Pem?: string }
  | { kind: 'pkcs11'; module: string; token: string; pin: { value: string } | { file: string } };
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
  signingProvider: SigningProviderSettings;
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
  /** Every outbound call (CONTRACT "Egress"). */
  egress: EgressSettings;
  /** `iss` of signed releases (SVC_ISSUER). */
  issuer: string;
  /** SVC_SOURCE_TIMEOUT_MS: the one deadline of the business signal sources asked for a request. */
  sourceTimeoutMs: number;
  /** SVC_OVERRIDE_TTL_SECONDS: how long a held transaction waits for a human before it is refused by expiry. */
  overrideTtlSeconds: number;
  /** SVC_GRANT_MAX_DAYS: how many days ahead an authority grant may expire (1 to 3660). */
  grantMaxDays: number;
  /** The transparency log's origin, the first line of its checkpoints (SVC_LOG_ORIGIN). */
  logOrigin: string;
  /** SVC_COOKIE_SECURE: the console's session cookie is `Secure` even over plain HTTP (TLS ends at a proxy in front). */
  cookieSecure: boolean;
  /** The Prometheus metrics listener (SVC_METRICS_HOST:SVC_METRICS_PORT); off when SVC_METRICS_PORT is unset. */
  metrics?: { host: string; port: number };
  /** SVC_PUBLIC_URL: the service's address as people reach it (links in notifications); default http://SVC_HOST:SVC_PORT. */
  publicUrl: string;
  /** Webhook notifications of new pending items (SVC_NOTIFY_WEBHOOK_URLS); off when unset. The secret is never logged. */
  notifications?: NotificationSettings;
  /** The MCP gateway (CONTRACT "MCP gateway"). */
  mcp: McpSettings;
}

export interface NotificationSettings {
  /** The endpoints, each an https URL that obeys the egress rules (checked again at every call). */
  endpoints: string[];
  /** SVC_NOTIFY_WEBHOOK_SECRET: `whsec_` + base64 (Standard Webhooks). */
  secret: string;
}

export interface McpSettings {
  /** SVC_MCP_STDIO_SERVERS: the operator's stdio servers by name (empty when unset). Their env is never logged. */
  stdioServers: ReadonlyMap<string, StdioServerSpec>;
  /** SVC_MCP_ALLOWED_ORIGINS: browser origins that may call `/mcp` (default none: a request with another Origin is 403). */
  allowedOrigins: string[];
  /** SVC_MCP_HOLD_SECONDS: how long a `tools/call` held for a human waits; then it is refused by expiry. */
  holdSeconds: number;
}

export interface EgressSettings {
  /** SVC_DNS_SERVERS as `ip:port` entries; undefined: the system resolver. */
  dnsServers?: string[];
  /** SVC_EGRESS_ALLOW_CIDRS: ranges allowed although not public. */
  allowCidrs: string[];
  /** NODE_EXTRA_CA_CERTS: its file name and contents (PEM). */
  extraCa?: { file: string; pem: string };
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
  issuer: 'ets',
  sourceTimeoutMs: 5000,
  overrideTtlSeconds: 86_400,
  mcpHoldSeconds: 120,
  grantMaxDays: 366,
  metricsHost: '127.0.0.1',
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

function egress(env: Env, cwd: string): EgressSettings {
  const servers = present(env, 'SVC_DNS_SERVERS');
  let dnsServers: string[] | undefined;
  try {
    dnsServers = servers === undefined ? undefined : parseDnsServers(servers);
  } catch (e) {
    throw new ConfigError(`Invalid setting SVC_DNS_SERVERS=${JSON.stringify(servers)}: ${(e as Error).message}; accepted values are ip[:port],… .`);
  }
  if (dnsServers !== undefined && dnsServers.length === 0) throw new ConfigError('Invalid setting SVC_DNS_SERVERS: no resolver address given.');
  const cidrs = present(env, 'SVC_EGRESS_ALLOW_CIDRS');
  const allowCidrs = cidrs === undefined ? [] : cidrs.split(',').map((c) => c.trim()).filter((c) => c !== '');
  for (const c of allowCidrs) {
    try {
      parseCidr(c);
    } catch (e) {
      throw new ConfigError(`Invalid setting SVC_EGRESS_ALLOW_CIDRS: ${(e as Error).message}; accepted values are address ranges such as 10.0.0.0/8,fd00::/8.`);
    }
  }
  const caFile = present(env, 'NODE_EXTRA_CA_CERTS');
  let extraCa: EgressSettings['extraCa'];
  if (caFile !== undefined) {
    const file = path.resolve(cwd, caFile);
    try {
      extraCa = { file, pem: readFileSync(file, 'utf8') };
    } catch (e) {
      throw new ConfigError(`Invalid setting NODE_EXTRA_CA_CERTS=${JSON.stringify(caFile)}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}).`);
    }
    if (!extraCa.pem.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError(`Invalid setting NODE_EXTRA_CA_CERTS=${JSON.stringify(caFile)}: accepted values are PEM files of certificates.`);
  }
  return { dnsServers, allowCidrs, extraCa };
}

/** `v`, the value of setting `name`, if it is 1 to 256 visible ASCII characters; `example` ends the message. */
function visibleAscii(name: string, v: string, example = ''): string {
  if (!/^[\x21-\x7e]{1,256}$/.test(v)) throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(v)}: accepted values are 1 to 256 visible ASCII characters${example}.`);
  return v;
}

function issuer(env: Env): string {
  return visibleAscii('SVC_ISSUER', present(env, 'SVC_ISSUER') ?? DEFAULTS.issuer);
}

/** SVC_LOG_ORIGIN, by default `<SVC_ISSUER>/log`: C2SP tlog-checkpoint's origin, one line naming the log. */
function logOrigin(env: Env, issuerName: string): string {
  return visibleAscii('SVC_LOG_ORIGIN', present(env, 'SVC_LOG_ORIGIN') ?? `${issuerName}/log`, ', such as ets.example.com/log');
}

const requiredFor = (env: Env, name: string, provider: string, what: string): string => {
  const v = present(env, name);
  if (v === undefined) throw new ConfigError(`Missing setting ${name}: SVC_SIGNING_PROVIDER=${provider} needs ${what}.`);
  return v;
};

function signingProvider(env: Env, mode: SigningMode, cwd: string): SigningProviderSettings {
  const kind = oneOf(env, 'SVC_SIGNING_PROVIDER', ['disk', 'env', 'pkcs11'] as const, 'disk');
  if (kind === 'disk') return { kind };
  // The PEMs are checked when the provider opens (a missing one stops the start there), so that
  // `ets signing-keys rotate` can make the first ones.
  if (kind === 'env') return { kind, ed25519Pem: present(env, 'SVC_SIGNING_KEY_PEM'), mlDsa65Pem: present(env, 'SVC_SIGNING_PQ_KEY_PEM') };
  // Spec 8: hybrid crypto and the managed key service together refuse to start.
  if (mode === 'hybrid') {
    throw new ConfigError('Invalid settings SVC_SIGNING_MODE=hybrid with SVC_SIGNING_PROVIDER=pkcs11: the module holds Ed25519 keys only; use SVC_SIGNING_MODE=ed25519, or the disk or env provider.');
  }
  const module = requiredFor(env, 'SVC_PKCS11_MODULE', 'pkcs11', "the path of the module's shared library");
  const token = requiredFor(env, 'SVC_PKCS11_TOKEN', 'pkcs11', 'the token label');
  const pin = present(env, 'SVC_PKCS11_PIN');
  const pinFile = present(env, 'SVC_PKCS11_PIN_FILE');
  if ((pin === undefined) === (pinFile === undefined)) {
    throw new ConfigError('Invalid settings SVC_PKCS11_PIN, SVC_PKCS11_PIN_FILE: SVC_SIGNING_PROVIDER=pkcs11 needs exactly one of them (the user PIN, or a file holding it).');
  }
  return { kind, module, token, pin: pin !== undefined ? { value: pin } : { file: path.resolve(cwd, pinFile!) } };
}

function listenHost(env: Env, name: string, fallback: string): string {
  const host = present(env, name) ?? fallback;
  if (!/^[A-Za-z0-9.:\-[\]]+$/.test(host)) {
    throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(host)}: accepted values are a host name or IP address.`);
  }
  return host;
}

/** A separate listener for `GET /metrics`, only when SVC_METRICS_PORT is set (loopback by default). */
function metrics(env: Env): Settings['metrics'] {
  const port = present(env, 'SVC_METRICS_PORT');
  if (port === undefined) {
    if (present(env, 'SVC_METRICS_HOST') !== undefined) throw new ConfigError('Invalid setting SVC_METRICS_HOST: it needs SVC_METRICS_PORT (the metrics listener is off without it).');
    return undefined;
  }
  return { host: listenHost(env, 'SVC_METRICS_HOST', DEFAULTS.metricsHost), port: int(env, 'SVC_METRICS_PORT', 0, 0, 65535) };
}

/**
 * SVC_NOTIFY_WEBHOOK_URLS and SVC_NOTIFY_WEBHOOK_SECRET, both or neither. Messages never quote a
 * value: a webhook URL's path may itself be a credential, and the secret is one.
 */
function notifications(env: Env): NotificationSettings | undefined {
  const urls = present(env, 'SVC_NOTIFY_WEBHOOK_URLS');
  const secret = present(env, 'SVC_NOTIFY_WEBHOOK_SECRET');
  if (urls === undefined) {
    if (secret !== undefined) throw new ConfigError('Invalid setting SVC_NOTIFY_WEBHOOK_SECRET: it needs SVC_NOTIFY_WEBHOOK_URLS (notifications are off without them).');
    return undefined;
  }
  const endpoints: string[] = [];
  for (const [i, raw] of urls.split(',').map((u) => u.trim()).entries()) {
    const reading = readEndpoint(raw);
    if (!reading.ok) throw new ConfigError(`Invalid setting SVC_NOTIFY_WEBHOOK_URLS: entry ${i + 1} ${reading.problem === 'is required: an https URL.' ? 'is empty' : reading.problem.replace(/\.$/, '')}; accepted values are https URLs with a host name, separated by commas.`);
    if (!endpoints.includes(reading.endpoint.url)) endpoints.push(reading.endpoint.url);
  }
  if (secret === undefined) {
    throw new ConfigError('Missing setting SVC_NOTIFY_WEBHOOK_SECRET: SVC_NOTIFY_WEBHOOK_URLS needs the signing secret, whsec_ followed by the base64 of 24 to 64 random bytes.');
  }
  const read = readWebhookSecret(secret);
  if (!read.ok) throw new ConfigError(`Invalid setting SVC_NOTIFY_WEBHOOK_SECRET: ${read.problem}; accepted values are whsec_ followed by the base64 of 24 to 64 random bytes.`);
  return { endpoints, secret };
}

/** SVC_PUBLIC_URL: an http(s) URL without user, query or fragment; default `http://<host>:<port>`. */
function publicUrl(env: Env, host: string, port: number): string {
  const v = present(env, 'SVC_PUBLIC_URL');
  if (v === undefined) return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
  let u: URL | undefined;
  try {
    u = new URL(v);
  } catch {
    u = undefined;
  }
  if (!u || !['http:', 'https:'].includes(u.protocol) || u.username !== '' || u.password !== '' || u.search !== '' || u.hash !== '' || v.includes('#') || v.includes('?')) {
    throw new ConfigError(`Invalid setting SVC_PUBLIC_URL=${JSON.stringify(v)}: accepted values are http:// or https:// URLs without user, query or fragment, such as https://ets.example.com.`);
  }
  return u.href.replace(/\/+$/, '');
}

function mcp(env: Env, cwd: string): McpSettings {
  const file = present(env, 'SVC_MCP_STDIO_SERVERS');
  let stdioServers: ReadonlyMap<string, StdioServerSpec> = new Map();
  if (file !== undefined) {
    try {
      stdioServers = readStdioServersFile(path.resolve(cwd, file));
    } catch (e) {
      throw new ConfigError(`Invalid setting SVC_MCP_STDIO_SERVERS=${JSON.stringify(file)}: ${(e as Error).message}.`);
    }
  }
  const origins = present(env, 'SVC_MCP_ALLOWED_ORIGINS');
  const allowedOrigins = origins === undefined ? [] : origins.split(',').map((o) => o.trim()).filter((o) => o !== '');
  for (const o of allowedOrigins) {
    let origin: string | undefined;
    try {
      const u = new URL(o);
      origin = ['http:', 'https:'].includes(u.protocol) ? u.origin : undefined;
    } catch {
      origin = undefined;
    }
    if (origin === undefined || origin !== o.toLowerCase().replace(/\/$/, '')) {
      throw new ConfigError(`Invalid setting SVC_MCP_ALLOWED_ORIGINS: ${JSON.stringify(o)} is not an origin; accepted values are origins such as https://app.example.com,http://localhost:6274.`);
    }
  }
  return {
    stdioServers,
    allowedOrigins: allowedOrigins.map((o) => o.toLowerCase().replace(/\/$/, '')),
    holdSeconds: int(env, 'SVC_MCP_HOLD_SECONDS', DEFAULTS.mcpHoldSeconds, 1, 3600),
  };
}

export function loadSettings(env: Env = process.env, cwd: string = process.cwd()): Settings {
  const dataDir = path.resolve(cwd, present(env, 'SVC_DATA_DIR') ?? DEFAULTS.dataDir);
  const host = listenHost(env, 'SVC_HOST', DEFAULTS.host);
  const apiKeysInline = present(env, 'SVC_API_KEYS');
  if (apiKeysInline !== undefined) {
    try {
      const parsed: unknown = JSON.parse(apiKeysInline);
      if (!Array.isArray(parsed)) throw new Error('not an array');
    } catch {
      throw new ConfigError('Invalid setting SVC_API_KEYS: accepted values are a JSON array of key records (see README, "API keys").');
    }
  }
  const signingMode = oneOf(env, 'SVC_SIGNING_MODE', ['ed25519', 'hybrid'] as const, 'ed25519');
  // Assigned where the issuer is read, so an invalid setting is still reported in the order the settings are read.
  let issuerName: string;
  let port: number;
  return {
    host,
    port: (port = int(env, 'SVC_PORT', DEFAULTS.port, 0, 65535)),
    dataDir,
    databaseUrl: url(env, 'SVC_DATABASE_URL', ['postgres', 'postgresql']),
    apiKeysFile: path.resolve(cwd, present(env, 'SVC_API_KEYS_FILE') ?? path.join(dataDir, 'api-keys.json')),
    apiKeysInline,
    authDisabled: bool(env, 'SVC_AUTH_DISABLED', false),
    profile: oneOf(env, 'SVC_PROFILE', ['transaction', 'attestation', 'attestation-simple'] as const, 'transaction'),
    simpleApiKey: present(env, 'SVC_API_KEY'),
    sandbox: bool(env, 'SVC_SANDBOX', false),
    signingMode,
    signingProvider: signingProvider(env, signingMode, cwd),
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
    egress: egress(env, cwd),
    issuer: (issuerName = issuer(env)),
    sourceTimeoutMs: int(env, 'SVC_SOURCE_TIMEOUT_MS', DEFAULTS.sourceTimeoutMs, 100, 30_000),
    overrideTtlSeconds: int(env, 'SVC_OVERRIDE_TTL_SECONDS', DEFAULTS.overrideTtlSeconds, 1, 30 * 86_400),
    grantMaxDays: int(env, 'SVC_GRANT_MAX_DAYS', DEFAULTS.grantMaxDays, 1, 3660),
    logOrigin: logOrigin(env, issuerName),
    cookieSecure: bool(env, 'SVC_COOKIE_SECURE', false),
    metrics: metrics(env),
    publicUrl: publicUrl(env, host, port),
    notifications: notifications(env),
    mcp: mcp(env, cwd),
  };
}

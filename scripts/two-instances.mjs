#!/usr/bin/env node
// Two instances of the service on one PostgreSQL database and one Redis, on this machine: how a
// deployment of several instances runs, in one command. The two-instance test runs this very script.
//
//   node scripts/two-instances.mjs [--ports 8081,8082] [--metrics-ports 9464,9465] [--dir DIR]
//
// - The database is SVC_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/ets_two_instances),
//   created if it does not exist; Redis is SVC_REDIS_URL (default redis://127.0.0.1:6379).
// - Both instances sign with the same key, as instances of one deployment must: the `env` key
//   provider with one Ed25519 key, made once by `ets signing-keys rotate` and kept in DIR/signing.env
//   (mode 0600; a real deployment keeps it in its secret store). With SVC_SIGNING_PROVIDER set, yours is used.
// - API keys: SVC_API_KEYS or SVC_API_KEYS_FILE if set; otherwise one USER key for the caller
//   `operator` is issued into DIR/api-keys.json and printed once.
// - Each instance has its own data dir (DIR/a, DIR/b) and log (DIR/a.log, DIR/b.log); every other
//   SVC_* and RATE_LIMIT_* setting of this environment applies to both.
// - Both start at the same moment (their migrations serialise on PostgreSQL's advisory lock).
// - Ctrl-C or SIGTERM stops both gracefully (SIGTERM to each, then waits for them).
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ETS = path.join(ROOT, 'apps', 'server', 'bin', 'ets.js');
const NAMES = ['a', 'b'];

const { values } = parseArgs({
  options: { ports: { type: 'string', default: '8081,8082' }, 'metrics-ports': { type: 'string' }, dir: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
});
if (values.help) {
  process.stdout.write(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1).filter((l) => l.startsWith('//')).map((l) => l.slice(3)).join('\n') + '\n');
  process.exit(0);
}
const portPair = (flag, v) => {
  const pair = v.split(',').map((p) => p.trim());
  if (pair.length !== 2 || pair.some((p) => !/^\d+$/.test(p))) fail(`${flag} takes two port numbers, e.g. 8081,8082 (0: any free port).`);
  return pair;
};
const ports = portPair('--ports', values.ports);
const metricsPorts = values['metrics-ports'] ? portPair('--metrics-ports', values['metrics-ports']) : undefined;
if (!metricsPorts && process.env.SVC_METRICS_PORT) fail('SVC_METRICS_PORT would be the same for both instances: give --metrics-ports A,B instead.');
const dir = path.resolve(values.dir ?? mkdtempSync(path.join(os.tmpdir(), 'ets-two-instances-')));
mkdirSync(dir, { recursive: true, mode: 0o700 });

const databaseUrl = process.env.SVC_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/ets_two_instances';
const redisUrl = process.env.SVC_REDIS_URL || 'redis://127.0.0.1:6379';
const redacted = (u) => {
  const url = new URL(u);
  if (url.password) url.password = '***';
  return url.toString();
};

function fail(message) {
  process.stderr.write(`two-instances: ${message}\n`);
  process.exit(1);
}

/** Creates the database when it does not exist (connecting to the server's `postgres` database). */
async function ensureDatabase(url) {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) fail(`database name ${JSON.stringify(name)}: letters, digits and _ only.`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  try {
    await client.connect();
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name}"`);
      return 'created';
    }
    return 'existing';
  } catch (e) {
    fail(`PostgreSQL at ${redacted(url)}: ${e.message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** `ets …` to completion; its stdout. */
function ets(args, env) {
  const r = spawnSync(process.execPath, [ETS, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  if (r.status !== 0) fail(`ets ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** The shared signing key: the operator's provider settings, or one env-provider key kept in DIR/signing.env. */
function signingEnv() {
  if (process.env.SVC_SIGNING_PROVIDER) return {};
  const file = path.join(dir, 'signing.env');
  if (!existsSync(file)) {
    const made = JSON.parse(ets(['signing-keys', 'rotate'], { SVC_SIGNING_PROVIDER: 'env', SVC_SIGNING_MODE: 'ed25519' }));
    writeFileSync(file, JSON.stringify(made.environment), { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  return { SVC_SIGNING_PROVIDER: 'env', ...JSON.parse(readFileSync(file, 'utf8')) };
}

/** API keys: the operator's, or one USER key issued into DIR/api-keys.json (printed once). */
function apiKeys() {
  if (process.env.SVC_API_KEYS || process.env.SVC_API_KEYS_FILE) return { env: {}, issued: undefined };
  const file = path.join(dir, 'api-keys.json');
  const env = { SVC_API_KEYS_FILE: file };
  if (existsSync(file)) return { env, issued: undefined };
  return { env, issued: ets(['keys', 'add', '--caller-id', 'operator', '--holder', 'USER', '--capabilities', '*'], env) };
}

/** Starts `ets serve`; resolves with its address once it listens. */
function start(name, port, metricsPort, env) {
  const log = path.join(dir, `${name}.log`);
  const out = createWriteStream(log, { flags: 'a' });
  const child = spawn(process.execPath, [ETS, 'serve'], { env: { ...process.env, ...env, SVC_PORT: port, ...(metricsPort ? { SVC_METRICS_PORT: metricsPort } : {}), SVC_DATA_DIR: path.join(dir, name) }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (d) => {
      seen += d.toString();
      const m = /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"listening"/.exec(seen);
      if (m) {
        child.stdout.off('data', onData);
        resolve({ name, child, url: m[1], log, metricsUrl: /"metricsUrl":"([^"]+)"/.exec(seen)?.[1] });
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`instance ${name} exited with ${code} before listening; see ${log}:\n${seen.split('\n').slice(-5).join('\n')}`)));
  });
}

const database = await ensureDatabase(databaseUrl);
const common = { SVC_DATABASE_URL: databaseUrl, SVC_REDIS_URL: redisUrl, ...signingEnv() };
const keys = apiKeys();
Object.assign(common, keys.env);

let instances;
try {
  // At the same moment: both run the migrations; the advisory lock lets one apply them.
  instances = await Promise.all(NAMES.map((name, i) => start(name, ports[i], metricsPorts?.[i], common)));
} catch (e) {
  process.stderr.write(`two-instances: ${e.message}\n`);
  process.exit(1);
}

let stopping = false;
async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  process.stdout.write('stopping both instances (SIGTERM)...\n');
  await Promise.all(
    instances.map(
      (s) =>
        new Promise((resolve) => {
          if (s.child.exitCode !== null) return resolve();
          s.child.once('exit', (c) => {
            process.stdout.write(`instance ${s.name} stopped (exit ${c})\n`);
            resolve();
          });
          s.child.kill('SIGTERM');
        }),
    ),
  );
  process.exit(code);
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));
for (const s of instances) {
  s.child.once('exit', (code) => {
    if (stopping) return;
    process.stderr.write(`two-instances: instance ${s.name} exited (${code}); see ${s.log}. Stopping the other.\n`);
    void stopAll(1);
  });
}

const keyId = (() => {
  const r = spawnSync(process.execPath, [ETS, 'signing-keys', 'list'], { env: { ...process.env, ...common, SVC_DATA_DIR: path.join(dir, 'a') }, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim().split('\n').filter((l) => l.includes('active')).map((l) => l.trim().split(/\s+/)[0]).join(', ') : '(see ets signing-keys list)';
})();

process.stdout.write(
  [
    ...instances.map((s) => `instance ${s.name}: ${s.url}  (pid ${s.child.pid}, data ${path.join(dir, s.name)}, log ${s.log}${s.metricsUrl ? `, metrics ${s.metricsUrl}` : ''})`),
    `database: ${redacted(databaseUrl)} (${database})`,
    `redis: ${redacted(redisUrl)}`,
    `signing key: ${keyId} (${process.env.SVC_SIGNING_PROVIDER ? `provider ${process.env.SVC_SIGNING_PROVIDER}` : `env provider, PEM in ${path.join(dir, 'signing.env')}`})`,
    keys.issued ? `API key (caller operator, USER, every capability; shown once): ${keys.issued}` : `API keys: ${process.env.SVC_API_KEYS ? 'SVC_API_KEYS' : common.SVC_API_KEYS_FILE ?? process.env.SVC_API_KEYS_FILE}`,
    'Ctrl-C (or SIGTERM to this script) stops both.',
    'READY',
    '',
  ].join('\n'),
);

#!/usr/bin/env node
// npm run bench: measures the execution pipeline over loopback against a real `ets serve` process,
// on SQLite and (when it answers) PostgreSQL. Prints requests per second and latency percentiles.
// Options (env): BENCH_SECONDS (default 10), BENCH_CONCURRENCY (32), BENCH_STORES (sqlite,postgres),
// BENCH_PG_URL (postgres://postgres@127.0.0.1:5432/postgres), BENCH_SIGNING_MODE (ed25519).
import { spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { canonicalize } from '@ets/adapters-crypto';
import { createDataSource, migrate, TypeOrmPolicyStore } from '@ets/adapters-persistence';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const STORES = (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',');
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const POLICY = {
  name: 'bench', policyVersion: '1.0.0', description: 'benchmark',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'ok', when: 'signals.amount <= 10000', action: 'approve', reason: 'Within limits' },
  ],
  default: { action: 'reject', reason: 'No rule matched' },
};

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

async function prepareStore(kind) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-bench-'));
  let target = { kind: 'sqlite', file: path.join(dataDir, 'ets.sqlite') };
  let dropDb = async () => {};
  if (kind === 'postgres') {
    const db = `ets_bench_${process.pid}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${db}`);
    await admin.end();
    const url = new URL(PG_URL); url.pathname = `/${db}`;
    target = { kind: 'postgres', url: url.toString() };
    dropDb = async () => {
      const c = new pg.Client({ connectionString: PG_URL }); await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`); await c.end();
    };
  }
  const ds = createDataSource(target);
  await ds.initialize();
  await migrate(ds);
  await new TypeOrmPolicyStore(ds).publish({
    name: POLICY.name, version: POLICY.policyVersion, content: POLICY,
    contentHash: createHash('sha256').update(canonicalize(POLICY)).digest('hex'),
    changeId: randomUUID(), proposer: 'bench', approvedBy: 'bench', approvedAt: new Date().toISOString(),
  });
  await ds.destroy();
  return { dataDir, target, cleanup: async () => { await dropDb(); rmSync(dataDir, { recursive: true, force: true }); } };
}

async function startServer(store, key) {
  const port = await freePort();
  const env = {
    PATH: process.env.PATH, SVC_PORT: String(port), SVC_HOST: '127.0.0.1', SVC_DATA_DIR: store.dataDir,
    SVC_LOG_LEVEL: process.env.BENCH_DEBUG ? 'info' : 'warn', SVC_SIGNING_MODE: process.env.BENCH_SIGNING_MODE ?? 'ed25519',
    RATE_LIMIT_EXECUTE_PER_MINUTE: '10000000', RATE_LIMIT_HEALTH_PER_MINUTE: '10000000',
    SVC_API_KEYS: JSON.stringify([{ callerId: 'bench-agent', keyHash: createHash('sha256').update(key).digest('hex'), credentialHolderType: 'SERVICE', allowedCapabilities: ['*'], allowedTenantIds: [], createdAt: new Date().toISOString() }]),
    ...(store.target.kind === 'postgres' ? { SVC_DATABASE_URL: store.target.url } : {}),
  };
  const child = spawn(process.execPath, [...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), path.join(ROOT, 'apps/server/dist/cli.js'), 'serve'], { env, stdio: ['ignore', process.env.BENCH_DEBUG ? 'inherit' : 'ignore', 'inherit'] });
  const url = `http://127.0.0.1:${port}`;
  let exited = false;
  child.once('exit', () => (exited = true));
  for (let i = 0; i < 200 && !exited; i++) {
    try { const r = await fetch(`${url}/health`); if (r.ok) return { url, child }; } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error('server did not start');
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
function post(url, pathName, body, key) {
  return new Promise((resolve) => {
    const data = JSON.stringify(body);
    const started = process.hrtime.bigint();
    const req = http.request(`${url}${pathName}`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - started) / 1e6 }));
    });
    req.on('error', () => resolve({ status: 0, ms: Number(process.hrtime.bigint() - started) / 1e6 }));
    req.end(data);
  });
}

const tx = (country = 'FR') => ({
  businessTransactionId: randomUUID(),
  metadata: {}, authority: { principalId: 'bench-agent', authorityId: 'a' }, authorization: { authorityId: 'a' },
  intent: { action: 'sandbox:echo', parameters: { amount: 120, currency: 'EUR', reference: randomBytes(6).toString('hex') } },
  policy: { name: 'bench', version: '1.0.0' }, signals: { amount: 120, country },
});

async function load(url, key, pathName, make, seconds) {
  const latencies = []; const statuses = new Map();
  const end = Date.now() + seconds * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < end) {
      const r = await post(url, pathName, make(), key);
      latencies.push(r.ms); statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
  }));
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]?.toFixed(1);
  return { rps: Math.round(latencies.length / seconds), p50: pct(50), p95: pct(95), p99: pct(99), statuses: Object.fromEntries(statuses) };
}

async function reachable(kind) {
  if (kind !== 'postgres') return true;
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try { await c.connect(); await c.end(); return true; } catch { return false; }
}

console.log(`ets bench: ${SECONDS}s per scenario, ${CONCURRENCY} concurrent connections, node ${process.version}, ${os.cpus().length} cores`);
for (const kind of STORES) {
  if (!(await reachable(kind))) { console.log(`${kind}: not reachable, skipped`); continue; }
  const store = await prepareStore(kind);
  const key = `pk_local_${randomBytes(24).toString('base64url')}`;
  const server = await startServer(store, key);
  try {
    await load(server.url, key, '/execute', () => tx(), 2); // warm-up
    for (const [name, pathName, make] of [
      ['POST /execute (approve: intent, release, chained record)', '/execute', () => tx()],
      ['POST /execute (policy refusal: signed refusal record)', '/execute', () => tx('KP')],
      ['POST /transactions (record without release)', '/transactions', () => tx()],
    ]) {
      const r = await load(server.url, key, pathName, make, SECONDS);
      console.log(`${kind.padEnd(8)} ${name.padEnd(58)} ${String(r.rps).padStart(6)} req/s  p50 ${r.p50} ms  p95 ${r.p95} ms  p99 ${r.p99} ms  statuses ${JSON.stringify(r.statuses)}`);
    }
  } finally {
    server.child.kill('SIGTERM');
    await new Promise((r) => server.child.once('exit', r));
    await store.cleanup();
  }
}
agent.destroy();

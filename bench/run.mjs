#!/usr/bin/env node
// npm run bench: what the service costs on this machine, every guarantee on (commits durable before
// any release or answer, the transparency log appending every signed record, checkpoints at most
// once a second), measured with one load generator (autocannon) over loopback.
//
// 1. In-process: signatures per second per key provider (disk, env, pkcs11 through SoftHSM2) and in
//    hybrid mode (ML-DSA-65: Node's own when it has it, else the JS implementation), offline
//    verifications of Trust Records per second, policy decisions per second.
// 2. Over HTTP, 64 connections: a bare Express route; then per store (SQLite, then PostgreSQL) the
//    ceiling (bench/ceiling.mjs: the same four signatures and one durable group commit, nothing
//    else) and the service: POST /execute approve, a policy refusal, POST /transactions, an execute
//    whose policy asks a business signal source (a local HTTPS source), and an execute released to
//    an external connector (a local HTTPS receiver). Each prints requests per second, p50, p99,
//    errors, the peak RSS of the server process and the ratio to the store's ceiling.
// 3. Memory: the server's RSS after 10,000 and after 100,000 approved executions (a fresh server).
//
// Options (environment): BENCH_SECONDS (10), BENCH_CONNECTIONS (64), BENCH_STORES (sqlite,postgres),
// BENCH_PG_URL (postgres://postgres@127.0.0.1:5432/postgres), BENCH_SIGNING_MODE (ed25519),
// BENCH_SIGNING_PROVIDER (disk: the provider of the server runs), BENCH_SIGN_PROVIDERS
// (disk,env,pkcs11; empty skips), BENCH_SIGN_SECONDS (3), BENCH_MEMORY_EXECUTIONS (100000; 0 skips
// the memory run), BENCH_SCENARIOS (all: approve,refusal,transactions,sourced,connector),
// BENCH_NODE_ARGS (extra node options for the server, e.g. --cpu-prof), BENCH_DEBUG (server logs).
import { execFileSync, spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import {
  canonicalize,
  EnvKeyProvider,
  KeyRing,
  KeyRingSigner,
  mlDsa65Backend,
  nobleMlDsa65Backend,
  Pkcs11KeyProvider,
  Sha256Hasher,
  signStepUpPayload,
  verifyOffline,
} from '@ets/adapters-crypto';
import { createDataSource } from '@ets/adapters-persistence';
import { buildTrustRecord, compilePolicy, evaluatePolicy } from '@ets/domain';
import { initSoftHsmToken, writeSoftHsmConf } from '../scripts/softhsm-token.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
const SECONDS = Number(env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(env.BENCH_CONNECTIONS ?? 64);
const STORES = (env.BENCH_STORES ?? 'sqlite,postgres').split(',').filter(Boolean);
const PG_URL = env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SIGNING_MODE = env.BENCH_SIGNING_MODE ?? 'ed25519';
const SIGNING_PROVIDER = env.BENCH_SIGNING_PROVIDER ?? 'disk';
const SIGN_PROVIDERS = (env.BENCH_SIGN_PROVIDERS ?? 'disk,env,pkcs11').split(',').filter(Boolean);
const SIGN_SECONDS = Number(env.BENCH_SIGN_SECONDS ?? 3);
const MEMORY_EXECUTIONS = Number(env.BENCH_MEMORY_EXECUTIONS ?? 100_000);
const SCENARIOS = (env.BENCH_SCENARIOS ?? 'approve,refusal,transactions,sourced,connector').split(',').filter(Boolean);
const scratch = mkdtempSync(path.join(os.tmpdir(), 'ets-bench-'));
const results = [];

// --- the policies, callers and requests of the runs ---------------------------------------------------

const POLICIES = [
  {
    name: 'bench', policyVersion: '1.0.0', description: 'benchmark: approve within limits, refuse sanctioned countries',
    signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
    rules: [
      { id: 'sanctioned', when: "signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
      { id: 'ok', when: 'signals.amount <= 10000', action: 'approve', reason: 'Within limits' },
    ],
    default: { action: 'reject', reason: 'No rule matched' },
  },
  {
    name: 'bench-sourced', policyVersion: '1.0.0', description: 'benchmark: the invoice amount comes from the ERP',
    signalsSchema: { invoiceAmount: { type: 'number' } },
    signalSources: { invoiceAmount: { source: 'bench-erp', fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' } },
    rules: [{ id: 'ok', when: 'signals.invoiceAmount <= 10000', action: 'approve', reason: 'Invoice within limits' }],
    default: { action: 'reject', reason: 'No rule matched' },
  },
  {
    name: 'bench-connector', policyVersion: '1.0.0', description: 'benchmark: payments released to an external connector',
    signalsSchema: { amount: { type: 'number' } },
    rules: [{ id: 'ok', when: 'signals.amount <= 10000', action: 'approve', reason: 'Within limits' }],
    default: { action: 'reject', reason: 'No rule matched' },
  },
];

function caller(callerId, holder, stepUp) {
  const raw = `pk_local_${randomBytes(24).toString('base64url')}`;
  const keys = stepUp ? generateKeyPairSync('ed25519') : undefined;
  return {
    raw,
    stepUpPrivateKeyPem: keys?.privateKey.export({ type: 'pkcs8', format: 'pem' }),
    record: {
      callerId, keyHash: createHash('sha256').update(raw).digest('hex'), credentialHolderType: holder,
      allowedCapabilities: ['*'], allowedTenantIds: [], createdAt: new Date().toISOString(),
      ...(keys ? { stepUpPublicKey: keys.publicKey.export({ type: 'spki', format: 'pem' }) } : {}),
    },
  };
}
const alice = caller('bench-alice', 'USER', true);
const bob = caller('bench-bob', 'USER', true);
const agent = caller('bench-agent', 'SERVICE', false);

const transaction = (over = {}) => {
  const id = randomUUID();
  return {
    businessTransactionId: id,
    metadata: {}, authority: { principalId: 'bench-agent', authorityId: 'a' }, authorization: { authorityId: 'a' },
    intent: { action: 'sandbox:echo', parameters: { amount: 120, currency: 'EUR', reference: id.slice(0, 12) } },
    policy: { name: 'bench', version: '1.0.0' }, signals: { amount: 120, country: 'FR' },
    ...over,
  };
};
const SCENARIO = {
  approve: { title: 'POST /execute approve (intent, release, chained record)', path: '/execute', expect: 200, body: () => transaction() },
  refusal: { title: 'POST /execute policy refusal (signed refusal record)', path: '/execute', expect: 403, body: () => transaction({ signals: { amount: 120, country: 'KP' } }) },
  transactions: { title: 'POST /transactions (record without release)', path: '/transactions', expect: 201, body: () => transaction() },
  sourced: {
    title: 'POST /execute with a sourced signal (HTTPS source, signed fact)', path: '/execute', expect: 200,
    body: () => transaction({ intent: { action: 'sandbox:echo', parameters: { invoiceId: `inv-${Math.floor(Math.random() * 1000)}` } }, policy: { name: 'bench-sourced', version: '1.0.0' }, signals: {} }),
  },
  connector: {
    title: 'POST /execute released to an external connector (HTTPS, signed JWS)', path: '/execute', expect: 200,
    body: () => transaction({ intent: { action: 'benchpay:transfer', parameters: { amount: 120, currency: 'EUR' } }, policy: { name: 'bench-connector', version: '1.0.0' }, signals: { amount: 120 } }),
  },
};

// --- processes ----------------------------------------------------------------------------------------

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

/** Starts a node script and waits for the JSON or `listening <port>` line it prints when it serves. */
function spawnServing(args, options = {}) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', env.BENCH_DEBUG ? 'inherit' : 'ignore'], ...options });
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d) => {
      out += String(d);
      const line = out.split('\n').find((l) => l.startsWith('{') || l.startsWith('listening '));
      if (!line || !out.includes('\n')) return;
      child.stdout.off('data', onData);
      child.stdout.resume();
      resolve({ child, line });
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}) before serving`)));
  });
}

function stop(child) {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
  });
}

const rssMb = (pid) => {
  try {
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    return kb / 1024;
  } catch {
    return 0;
  }
};

async function startService(store, extraEnv, port) {
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [...(env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), path.join(ROOT, 'apps/server/dist/cli.js'), 'serve'], {
    env: {
      PATH: env.PATH, SVC_PORT: String(port), SVC_HOST: '127.0.0.1', SVC_DATA_DIR: store.dataDir,
      SVC_LOG_LEVEL: env.BENCH_DEBUG ? 'info' : 'warn', SVC_SIGNING_MODE: SIGNING_MODE, SVC_SIGNING_PROVIDER: SIGNING_PROVIDER,
      ...(await PROVIDERS[SIGNING_PROVIDER].env()),
      RATE_LIMIT_EXECUTE_PER_MINUTE: '10000000', RATE_LIMIT_HEALTH_PER_MINUTE: '10000000',
      SVC_API_KEYS: JSON.stringify([alice.record, bob.record, agent.record]),
      ...(store.url ? { SVC_DATABASE_URL: store.url } : {}),
      ...extraEnv,
    },
    stdio: ['ignore', env.BENCH_DEBUG ? 'inherit' : 'ignore', 'inherit'],
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  for (let i = 0; i < 1200 && !exited; i++) {
    try { if ((await fetch(`${url}/ready`)).ok) return { url, child }; } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error('the service did not start');
}

async function prepareStore(kind) {
  const dataDir = mkdtempSync(path.join(scratch, `${kind}-`));
  if (kind === 'sqlite') return { kind, dataDir, file: path.join(dataDir, 'ets.sqlite'), cleanup: async () => {} };
  const db = `ets_bench_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  const admin = async (sql) => { const c = new pg.Client({ connectionString: PG_URL }); await c.connect(); try { await c.query(sql); } finally { await c.end(); } };
  await admin(`CREATE DATABASE ${db}`);
  const url = new URL(PG_URL); url.pathname = `/${db}`;
  return { kind, dataDir, url: url.toString(), cleanup: () => admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`) };
}

// --- governance through the API, as operators do it -------------------------------------------------

async function call(url, method, pathName, who, body) {
  const r = await fetch(`${url}${pathName}`, { method, headers: { 'content-type': 'application/json', authorization: `Bearer ${who.raw}` }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${pathName}: ${r.status} ${text}`);
  return JSON.parse(text);
}
const envelope = (checker, changeId) => {
  const payload = { pendingPolicyChangeId: changeId, action: 'approve', expiresAt: new Date(Date.now() + 300_000).toISOString(), nonce: randomBytes(32).toString('base64url'), callerId: checker.record.callerId };
  return { payload, signature: signStepUpPayload(checker.stepUpPrivateKeyPem, payload) };
};
async function governed(url, proposePath, decidePrefix, body) {
  const change = await call(url, 'POST', proposePath, alice, body);
  await call(url, 'POST', `${decidePrefix}/${change.id}/approve`, bob, envelope(bob, change.id));
}
async function setUp(url, peers) {
  for (const p of POLICIES) await governed(url, `/policies/${p.name}/${p.policyVersion}/pending-changes`, '/policies/pending-changes', { proposedContent: p, reason: 'benchmark' });
  if (peers) {
    await governed(url, '/business-signal-sources/changes', '/business-signal-sources/changes', { kind: 'register', name: 'bench-erp', endpoint: peers.source.endpoint, publicKey: peers.source.publicKeyPem, reason: 'benchmark' });
    await governed(url, '/external-connectors/changes', '/external-connectors/changes', {
      kind: 'register', capability: 'benchpay:transfer', endpoint: peers.receiver.endpoint, policyName: 'bench-connector', forwardedParameters: ['amount', 'currency'], timeoutMs: 10000, reason: 'benchmark',
    });
  }
}

// --- load ---------------------------------------------------------------------------------------------

/** One autocannon run; the server's RSS sampled every 100 ms for its peak. */
async function load(url, scenario, seconds, pid, key = agent.raw) {
  let peak = pid ? rssMb(pid) : 0;
  const sampler = pid ? setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100) : undefined;
  try {
    const r = await autocannon({
      url, connections: CONNECTIONS, duration: seconds, timeout: 30,
      requests: [{ method: 'POST', path: scenario.path, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, setupRequest: (req) => ({ ...req, body: JSON.stringify(scenario.body()) }) }],
    });
    const expected = r.statusCodeStats?.[scenario.expect]?.count ?? 0;
    const answered = Object.values(r.statusCodeStats ?? {}).reduce((n, s) => n + s.count, 0);
    return { rps: expected / seconds, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts + (answered - expected), peakRssMb: peak, statuses: r.statusCodeStats };
  } finally {
    if (sampler) clearInterval(sampler);
  }
}

const fmt = (n, d = 0) => (typeof n === 'number' && Number.isFinite(n) ? n.toFixed(d) : '-');
function report(store, title, r, ceiling) {
  const ratio = ceiling ? ` ${fmt((100 * r.rps) / ceiling, 0).padStart(3)}% of ceiling` : '';
  console.log(`${store.padEnd(8)} ${title.padEnd(66)} ${fmt(r.rps).padStart(6)} req/s  p50 ${fmt(r.p50, 1).padStart(5)} ms  p99 ${fmt(r.p99, 1).padStart(6)} ms  errors ${r.errors}  peak RSS ${fmt(r.peakRssMb)} MB${ratio}`);
  results.push({ store, title, ...r, ratio: ceiling ? r.rps / ceiling : undefined });
}

// --- in-process figures -------------------------------------------------------------------------------

let softHsm;
function softHsmToken() {
  if (!softHsm) {
    softHsm = initSoftHsmToken(writeSoftHsmConf(path.join(scratch, 'softhsm')), { label: 'ets-bench', pin: randomBytes(8).toString('hex') });
    process.env.SOFTHSM2_CONF = softHsm.conf;
  }
  return softHsm;
}
const PROVIDERS = {
  disk: { env: () => ({}), open: (mode) => KeyRing.open({ dataDir: mkdtempSync(path.join(scratch, 'disk-')), mode }) },
  env: {
    env: async () => (await EnvKeyProvider.generate(SIGNING_MODE)).environment,
    open: async (mode) => {
      const values = (await EnvKeyProvider.generate(mode)).environment;
      return EnvKeyProvider.open({ mode, ed25519Pem: values.SVC_SIGNING_KEY_PEM, mlDsa65Pem: values.SVC_SIGNING_PQ_KEY_PEM });
    },
  },
  pkcs11: {
    env: () => { const t = softHsmToken(); return { SOFTHSM2_CONF: t.conf, SVC_PKCS11_MODULE: t.module, SVC_PKCS11_TOKEN: t.label, SVC_PKCS11_PIN: t.pin }; },
    open: () => { const t = softHsmToken(); return Pkcs11KeyProvider.open({ module: t.module, token: t.label, pin: t.pin, mode: 'ed25519' }); },
  },
};
const sampleRecord = () => ({ ...transaction(), recordType: 'execution-trust-record', resultHash: randomBytes(32).toString('hex'), chainHash: randomBytes(32).toString('hex') });

/** Signatures per second of one provider and mode: CONNECTIONS concurrent signers over a record the size of a Trust Record. */
async function signingRate(name, mode) {
  const provider = await PROVIDERS[name].open(mode);
  try {
    const signer = new KeyRingSigner(provider);
    const record = sampleRecord();
    for (let i = 0; i < 20; i++) await signer.sign(record);
    let count = 0;
    const end = Date.now() + SIGN_SECONDS * 1000;
    await Promise.all(Array.from({ length: CONNECTIONS }, async () => { while (Date.now() < end) { await signer.sign({ ...record, n: count }); count++; } }));
    return count / SIGN_SECONDS;
  } finally {
    await provider.close();
  }
}

async function rate(seconds, fn) {
  let n = 0;
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) for (let i = 0; i < 100; i++, n++) await fn(n);
  return n / seconds;
}

async function inProcessFigures() {
  for (const name of SIGN_PROVIDERS) {
    const perSecond = await signingRate(name, 'ed25519');
    console.log(`signing  ${name.padEnd(8)} Ed25519                                  ${fmt(perSecond).padStart(7)} signatures/s  (${CONNECTIONS} concurrent signers${name === 'pkcs11' ? ', SoftHSM2, pooled sessions' : ''})`);
    results.push({ figure: `signatures/s ${name}`, value: perSecond });
  }
  const hybrid = await signingRate('disk', 'hybrid');
  console.log(`signing  disk     hybrid Ed25519 + ML-DSA-65 (${mlDsa65Backend().name.padEnd(6)})        ${fmt(hybrid).padStart(7)} signatures/s  (what the service uses on Node ${process.version})`);
  results.push({ figure: `signatures/s hybrid ${mlDsa65Backend().name}`, value: hybrid });
  // ML-DSA-65 alone, each implementation: the JS one always, Node's own where it has a sound one (Node 24).
  const message = Buffer.from(canonicalize(sampleRecord()), 'utf8');
  for (const backend of [...new Set([nobleMlDsa65Backend, mlDsa65Backend()])]) {
    const key = backend.privateKeyFromSeed(randomBytes(32));
    const perSecond = await rate(SIGN_SECONDS, () => key.sign(message));
    console.log(`signing  ML-DSA-65 alone (${backend.name === 'node' ? 'Node native' : 'noble, JS '})                            ${fmt(perSecond).padStart(7)} signatures/s`);
    results.push({ figure: `ML-DSA-65 signatures/s ${backend.name}`, value: perSecond });
  }
  if (mlDsa65Backend().name !== 'node') console.log(`signing  ML-DSA-65 alone (Node native)                                 - (Node ${process.version} has none; Node 24 does)`);

  // Offline verification of Trust Records as the service builds them (the domain's buildTrustRecord:
  // signed, chained), verified with the JWKS only: signature, chain signature, recomputed hashes.
  const ring = await KeyRing.open({ dataDir: mkdtempSync(path.join(scratch, 'verify-')), mode: 'ed25519' });
  const deps = { hasher: new Sha256Hasher(), signer: new KeyRingSigner(ring) };
  const records = [];
  let head = { chainHash: null };
  for (let i = 0; i < 200; i++) {
    const tx = transaction();
    const now = new Date().toISOString();
    const record = await buildTrustRecord(deps, {
      transaction: tx,
      decision: { action: 'approve', reason: 'Within limits', requires_override: false, matchedRuleId: 'ok' },
      policy: { name: 'bench', version: '1.0.0', contentHash: deps.hasher.contentHash(POLICIES[0]) },
      assessment: { authority: { status: 'VERIFIED', callerId: 'bench-agent', principalId: 'bench-agent', grant: null }, businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] }, execution: { status: 'EXECUTED' } },
      execution: { executionId: randomUUID(), connector: 'sandbox', action: 'sandbox:echo', status: 'SUCCEEDED', releasedAt: now, completedAt: now, resultHash: deps.hasher.contentHash({ echo: tx.intent.parameters }), result: { echo: tx.intent.parameters } },
    }, head, 'bench-agent', now);
    records.push(record);
    head = { chainHash: record.executions[0].chainHash };
  }
  const jwks = ring.jwks();
  const failed = records.filter((r) => !verifyOffline(r, jwks).valid).length;
  if (failed) throw new Error(`${failed} sample records did not verify offline: ${JSON.stringify(verifyOffline(records[0], jwks).checks.filter((c) => !c.ok))}`);
  const verifications = await rate(3, (n) => verifyOffline(records[n % records.length], jwks));
  console.log(`verify   offline Trust Records (signature, chain signature, hashes; JWKS only)         ${fmt(verifications).padStart(7)} records/s  (one thread)`);
  results.push({ figure: 'offline verifications/s', value: verifications });
  await ring.close();

  const compiled = compilePolicy(POLICIES[0]);
  const decisions = await rate(3, (n) => evaluatePolicy(compiled, { signals: { amount: n % 20000, country: n % 7 === 0 ? 'KP' : 'FR' }, intent: { action: 'sandbox:echo', parameters: {} } }));
  console.log(`policy   decisions (compiled CEL, first match of 2 rules and a default)               ${fmt(decisions).padStart(7)} decisions/s`);
  results.push({ figure: 'policy decisions/s', value: decisions });
}

// --- the runs -----------------------------------------------------------------------------------------

/** A reference server of ours (bench/<script> ARGS) under the approve scenario, after a 2 s warm-up; its requests per second. */
async function referenceRun(script, args, label, title) {
  const port = await freePort();
  const { child } = await spawnServing([path.join(ROOT, 'bench', script), ...args], { env: { ...env, PORT: String(port) } });
  try {
    const url = `http://127.0.0.1:${port}`;
    await load(url, SCENARIO.approve, 2, child.pid);
    const r = await load(url, SCENARIO.approve, SECONDS, child.pid);
    report(label, title, r);
    return r.rps;
  } finally {
    await stop(child);
  }
}

const bareExpress = () => referenceRun('bare-express.mjs', [], 'http', 'bare Express route (JSON body in, JSON out)');

function ceiling(store) {
  const where = store.kind === 'sqlite' ? path.join(store.dataDir, 'ceiling.sqlite') : store.url;
  return referenceRun('ceiling.mjs', [store.kind, where], store.kind, 'ceiling: 4 Ed25519 signatures + 1 durable group commit');
}

async function withPeers(serviceUrl, fn) {
  const dir = mkdtempSync(path.join(scratch, 'peers-'));
  const { child, line } = await spawnServing([path.join(ROOT, 'bench/peers.mjs'), dir, serviceUrl]);
  try {
    return await fn(JSON.parse(line));
  } finally {
    await stop(child);
  }
}

async function logSummary(store) {
  const ds = createDataSource(store.kind === 'sqlite' ? { kind: 'sqlite', file: store.file } : { kind: 'postgres', url: store.url }, { readOnly: true });
  await ds.initialize();
  try {
    const [{ n: leaves }] = await ds.query('SELECT COUNT(*) AS n FROM transparency_log_leaves');
    const [{ n: checkpoints, first, last }] = await ds.query('SELECT COUNT(*) AS n, MIN(created_at) AS first, MAX(created_at) AS last FROM transparency_log_checkpoints');
    const span = (Date.parse(last) - Date.parse(first)) / 1000;
    console.log(`${store.kind.padEnd(8)} transparency log on for every run: ${leaves} leaves (one per signed record), ${checkpoints} signed checkpoints over ${fmt(span)} s (at most one a second)`);
  } finally {
    await ds.destroy();
  }
}

async function serviceRuns(store, ceilingRps) {
  // The service's port is chosen first: the receiver verifies releases with the service's JWKS.
  const port = await freePort();
  const serviceUrl = `http://127.0.0.1:${port}`;
  await withPeers(serviceUrl, async (peers) => {
    const service = await startService(store, { SVC_DNS_SERVERS: peers.dns, SVC_EGRESS_ALLOW_CIDRS: '127.0.0.0/8', NODE_EXTRA_CA_CERTS: peers.caFile }, port);
    try {
      await setUp(service.url, peers);
      await load(service.url, SCENARIO.approve, 2, service.child.pid);
      if (env.BENCH_DEBUG) for (const name of ['sourced', 'connector']) {
        const r = await fetch(`${service.url}${SCENARIO[name].path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${agent.raw}` }, body: JSON.stringify(SCENARIO[name].body()) });
        console.log(name, r.status, (await r.text()).slice(0, 400));
      }
      for (const name of SCENARIOS) report(store.kind, SCENARIO[name].title, await load(service.url, SCENARIO[name], SECONDS, service.child.pid), ceilingRps);
    } finally {
      await stop(service.child);
    }
  });
  await logSummary(store);
}

/** RSS of a fresh server after 10,000 and after MEMORY_EXECUTIONS approved executions. */
async function memoryRun(kind) {
  const store = await prepareStore(kind);
  try {
    const service = await startService(store, {});
    try {
      await setUp(service.url);
      const done = async (target) => {
        let count = 0;
        while (count < target) {
          const r = await autocannon({
            url: service.url, connections: CONNECTIONS, amount: Math.min(10_000, target - count), timeout: 30,
            requests: [{ method: 'POST', path: '/execute', headers: { 'content-type': 'application/json', authorization: `Bearer ${agent.raw}` }, setupRequest: (req) => ({ ...req, body: JSON.stringify(transaction()) }) }],
          });
          count += r.statusCodeStats?.[200]?.count ?? 0;
          if ((r.statusCodeStats?.[200]?.count ?? 0) === 0) throw new Error(`memory run: no execution succeeded (${JSON.stringify(r.statusCodeStats)})`);
        }
        await new Promise((r) => setTimeout(r, 1000));
        return rssMb(service.child.pid);
      };
      const at10k = await done(10_000);
      const atEnd = await done(MEMORY_EXECUTIONS - 10_000);
      const growth = (100 * (atEnd - at10k)) / at10k;
      console.log(`${kind.padEnd(8)} memory: RSS ${fmt(at10k)} MB after 10,000 executions, ${fmt(atEnd)} MB after ${MEMORY_EXECUTIONS.toLocaleString('en')} (${growth >= 0 ? '+' : ''}${fmt(growth, 1)} %)`);
      results.push({ store: kind, figure: 'memory growth 10k->end %', value: growth, at10k, atEnd });
    } finally {
      await stop(service.child);
    }
  } finally {
    await store.cleanup();
  }
}

async function reachable(kind) {
  if (kind !== 'postgres') return true;
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try { await c.connect(); await c.end(); return true; } catch { return false; }
}

const cpu = os.cpus();
let commit = 'unknown';
try { commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim(); } catch {}
console.log(`ets bench ${new Date().toISOString()} at ${commit}: node ${process.version}, ${cpu.length} x ${cpu[0]?.model ?? 'cpu'}, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB; ${SECONDS} s per run, ${CONNECTIONS} connections (autocannon), signing ${SIGNING_MODE} with the ${SIGNING_PROVIDER} provider`);
try {
  await inProcessFigures();
  await bareExpress();
  for (const kind of STORES) {
    if (!(await reachable(kind))) { console.log(`${kind}: not reachable, skipped`); continue; }
    const store = await prepareStore(kind);
    try {
      const ceilingRps = await ceiling(store);
      await serviceRuns(store, ceilingRps);
    } finally {
      await store.cleanup();
    }
    if (MEMORY_EXECUTIONS >= 10_000) await memoryRun(kind);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
if (env.BENCH_JSON) console.log(JSON.stringify(results));

#!/usr/bin/env node
// The ceiling of `npm run bench`: the least an execution can cost on this machine with the
// service's guarantees, so that the service's figures can be read as a share of it. Per request it
// does what every approved execution must: read and parse the JSON body, hash the request, make the
// same four Ed25519 signatures the service makes (authentication audit event, Execution Intent,
// chain signature, Trust Record), and store the signed records durably in ONE group commit shared
// by every request that arrived in the same event-loop tick (SQLite: WAL, synchronous=FULL,
// BEGIN IMMEDIATE; PostgreSQL: one multi-row INSERT), answering only after its commit.
// Nothing else: no routing framework, no policy, no validation, no transparency log.
//
// Usage: node bench/ceiling.mjs sqlite FILE | postgres URL   (env PORT, default any free port)
// Prints `listening <port>` on stdout once it serves.
import { createHash, generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import http from 'node:http';
import Database from 'better-sqlite3';
import pg from 'pg';

const [kind, where] = process.argv.slice(2);
if (!['sqlite', 'postgres'].includes(kind) || !where) {
  console.error('usage: node bench/ceiling.mjs sqlite FILE | postgres URL');
  process.exit(2);
}
const { privateKey } = generateKeyPairSync('ed25519');
const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const signed = (record) => ({ ...record, signature: sign(null, Buffer.from(JSON.stringify(record)), privateKey).toString('base64') });

const DDL = 'CREATE TABLE IF NOT EXISTS ceiling_records (id TEXT PRIMARY KEY, intent TEXT NOT NULL, record TEXT NOT NULL, audit TEXT NOT NULL)';

/** Stores a batch of rows in one durable commit. */
let storeBatch;
if (kind === 'sqlite') {
  const db = new Database(where);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(DDL);
  const insert = db.prepare('INSERT INTO ceiling_records (id, intent, record, audit) VALUES (?, ?, ?, ?)');
  const batch = db.transaction((rows) => { for (const r of rows) insert.run(r); });
  storeBatch = async (rows) => batch.immediate(rows);
} else {
  const pool = new pg.Pool({ connectionString: where, max: 4 });
  await pool.query(DDL);
  storeBatch = async (rows) => {
    const params = rows.flat();
    const values = rows.map((_, i) => `($${i * 4 + 1}, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4})`).join(', ');
    await pool.query(`INSERT INTO ceiling_records (id, intent, record, audit) VALUES ${values}`, params);
  };
}

// Group commit: rows queued during one tick (and while a commit runs) share the next commit.
let queue = [];
let committing = false;
function enqueue(row) {
  return new Promise((resolve, reject) => {
    queue.push({ row, resolve, reject });
    if (!committing) { committing = true; setImmediate(drain); }
  });
}
async function drain() {
  while (queue.length > 0) {
    const batch = queue;
    queue = [];
    try {
      await storeBatch(batch.map((b) => b.row));
      for (const b of batch) b.resolve();
    } catch (e) {
      for (const b of batch) b.reject(e);
    }
  }
  committing = false;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    try {
      const text = Buffer.concat(chunks).toString('utf8');
      const tx = JSON.parse(text);
      const id = tx.businessTransactionId;
      const at = new Date().toISOString();
      const audit = signed({ eventId: randomUUID(), kind: 'caller-authentication', route: req.url, outcome: 'SUCCESS', occurredAt: at });
      const hash = sha256(text);
      const intent = signed({ recordType: 'execution-intent', businessTransactionId: id, businessTransactionHash: hash, action: tx.intent.action, preparedAt: at });
      const execution = { executionId: randomUUID(), status: 'SUCCEEDED', releasedAt: at, resultHash: sha256(JSON.stringify(tx.intent.parameters)), result: tx.intent.parameters };
      const chainHash = sha256(`:${sha256(JSON.stringify({ businessTransactionId: id, execution }))}`);
      const chainSignature = sign(null, Buffer.from(chainHash), privateKey).toString('base64');
      const record = signed({ recordType: 'execution-trust-record', businessTransactionId: id, businessTransactionHash: hash, transaction: tx, executions: [{ ...execution, chainHash, chainSignature }], recordedAt: at });
      await enqueue([id, JSON.stringify(intent), JSON.stringify(record), JSON.stringify(audit)]);
      const body = JSON.stringify({ executionStatus: 'EXECUTED', businessTransactionId: id, record });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } catch (e) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: String(e) }));
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));

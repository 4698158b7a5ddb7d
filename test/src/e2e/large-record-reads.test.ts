import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { TypeOrmExecutionStore } from '@ets/adapters-persistence';
import { canonicalize } from '@ets/adapters-crypto';
import type { SignedTrustRecord } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  makeKey,
  onDatabase,
  publishPolicy,
  spawnServer,
  STORAGE_TARGETS,
  type ProvisionedTarget,
  type SpawnedServer,
  type TestKey,
} from '@ets/test-support';

const owner = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const other = makeKey('agent-8', { holder: 'SERVICE', capabilities: ['*'] });

const RECORDS = 100;
const PAYLOAD_BYTES = 300 * 1024; // about 400 KB of base64 per record: 40 MB per page of 100
const READERS = 8;
/**
 * The server's V8 heap is capped at this many MB: one page held in memory (the stored texts, the
 * parsed records and the serialised answer) takes about 100 MB; eight at once would not fit, so a
 * server that assembled its pages could not answer them (issue 9 item 12: 360 MB to 1.2 GB).
 */
const HEAP_MB = 192;
/** Concurrent calls of one caller per route in the whole-record test, and what they may cost. */
const CALLS = 40;
/**
 * The longest /health may take meanwhile. Measured here at 0.3 to 1.1 s, and once at 2.8 s on
 * SQLite when the test run's other worker was driving Chromium on the same two cores: the bound
 * allows for that, and still fails a server whose event loop waits for the whole queue.
 */
const HEALTH_MS = 4000;
const GROWTH_MB = 150;

/** Resident memory of a process now (VmRSS) or at its peak (VmHWM), in MB; `resetPeak` starts a new peak (Linux clear_refs). */
const memoryMb = (pid: number, field: 'VmRSS' | 'VmHWM'): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const resetPeak = (pid: number): void => writeFileSync(`/proc/${pid}/clear_refs`, '5');

type Read = { status: number; bytes: number; head: string; tail: string };

/**
 * A GET whose body is not read until `resume()`: the server can only write as fast as the client
 * takes. `started` resolves once the answer has begun (or the request failed); `body` is the answer
 * read to its end, or the error that cut it.
 */
function slowGet(url: string, key: TestKey): { started: Promise<void>; resume(): void; body: Promise<Read | Error> } {
  let response: http.IncomingMessage | undefined;
  let onStart!: () => void;
  const started = new Promise<void>((resolve) => (onStart = resolve));
  const body = new Promise<Read | Error>((resolve) => {
    const failed = (e: Error) => {
      onStart();
      resolve(e);
    };
    const req = http.get(url, { headers: { authorization: bearer(key) } }, (res) => {
      response = res.pause();
      onStart();
      let bytes = 0;
      let head = '';
      let tail = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        bytes += Buffer.byteLength(chunk);
        if (head.length < 64) head += chunk.slice(0, 64);
        tail = (tail + chunk).slice(-120);
      });
      res.on('end', () => resolve({ status: res.statusCode!, bytes, head, tail }));
      res.on('error', failed);
    });
    req.on('error', failed);
  });
  return { started, resume: () => void response?.resume(), body };
}

/** One JSON request; the answer's status, size and (when small) body. */
function requestJson(method: 'GET' | 'POST', url: string, key: TestKey, body?: unknown): Promise<{ status: number; bytes: number; body: unknown }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method, headers: { authorization: bearer(key), ...(data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode!, bytes: Buffer.byteLength(text), body: text.length < 100_000 ? (JSON.parse(text) as unknown) : undefined });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** Asks /health again and again until stopped; `stop` gives the longest wait for an answer, in ms. */
function watchHealth(url: string): { stop(): Promise<number> } {
  let running = true;
  let longest = 0;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      const h = await getJson(`${url}/health`);
      if (h.status !== 200) throw new Error(`/health answered ${h.status}`);
      longest = Math.max(longest, performance.now() - t);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return Math.round(longest);
    },
  };
}

const getJson = (url: string, key?: TestKey): Promise<{ status: number; body: unknown }> =>
  new Promise((resolve, reject) => {
    http
      .get(url, { headers: key ? { authorization: bearer(key) } : {} }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) as unknown }));
      })
      .on('error', reject);
  });

/**
 * Issue 9 item 12 on a real server process, on both stores: eight concurrent 100-record pages of
 * 400 KB records, read by a client that takes its time, while /health and another caller are
 * answered; the process, with its heap capped far below eight pages, serves every byte.
 */
describe.each(STORAGE_TARGETS)('large record reads on $name', (factory) => {
  let db: ProvisionedTarget;
  let dataDir: string;
  let server: SpawnedServer;
  let expectedBytes: number;
  let expectedPage: string;

  beforeAll(async () => {
    db = await factory.provision();
    dataDir = db.target.kind === 'sqlite' ? path.dirname(db.target.file) : mkdtempSync(path.join(os.tmpdir(), 'ets-large-'));
    const texts: string[] = [];
    await onDatabase(db.target, async (ds) => {
      await publishPolicy(ds);
      const store = new TypeOrmExecutionStore(ds);
      for (let i = 0; i < RECORDS; i++) {
        const id = randomUUID();
        const at = new Date(Date.UTC(2025, 0, 1, 0, 0, i)).toISOString();
        const record = {
          recordType: 'execution-trust-record',
          businessTransactionId: id,
          businessTransactionHash: '0'.repeat(64),
          callerId: 'agent-7',
          transaction: { businessTransactionId: id, intent: { action: 'sandbox:echo', parameters: { blob: randomBytes(PAYLOAD_BYTES).toString('base64') } } },
          decision: { action: 'approve', reason: 'Within limits', requires_override: false, matchedRuleId: 'ok' },
          executions: [],
          recordedAt: at,
          keyId: 'k',
          signature: 'cw==',
        } as unknown as SignedTrustRecord;
        await store.storeRecordedTransaction({ businessTransactionId: id, callerId: 'agent-7', outcome: 'RECORDED', createdAt: at }, record);
        // Stored, and served, as its canonical text.
        texts.push(canonicalize(record));
      }
    });
    expectedPage = `{"items":[${texts.join(',')}],"page":1,"pageSize":${RECORDS},"total":${RECORDS}}`;
    expectedBytes = Buffer.byteLength(expectedPage);
    server = await spawnServer({
      SVC_DATA_DIR: dataDir,
      ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}),
      ...apiKeysEnv(owner, other),
      SVC_SANDBOX: 'true',
      NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}`,
    });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    if (db?.target.kind === 'postgres') rmSync(dataDir, { recursive: true, force: true });
  });

  it(`serves ${READERS} concurrent pages of ${RECORDS} large records to a slow reader in bounded memory, answering /health and another caller meanwhile`, async () => {
    const pid = server.child.pid!;
    expect((await getJson(`${server.url}/trust-records?pageSize=1`, owner)).status).toBe(200);
    resetPeak(pid);
    const before = memoryMb(pid, 'VmRSS');

    const readers = Array.from({ length: READERS }, () => slowGet(`${server.url}/trust-records?pageSize=${RECORDS}`, owner));
    // The first two are being written (and wait for this client); the others wait their turn.
    await Promise.all(readers.slice(0, 2).map((r) => r.started));
    const health = await getJson(`${server.url}/health`);
    expect(health).toEqual({ status: 200, body: { status: 'UP' } });
    const others = await getJson(`${server.url}/trust-records?pageSize=5`, other);
    expect(others).toEqual({ status: 200, body: { items: [], page: 1, pageSize: 5, total: 0 } });
    const a = await getJson(`${server.url}/transactions?pageSize=1`, other);
    expect(a.status).toBe(200);

    for (const r of readers) void r.started.then(() => r.resume());
    const bodies = await Promise.all(readers.map((r) => r.body));
    for (const b of bodies) {
      if (b instanceof Error) throw b;
      expect({ status: b.status, bytes: b.bytes }).toEqual({ status: 200, bytes: expectedBytes });
      // Records are served as stored: their canonical text, members in RFC 8785 order.
      expect(expectedPage.startsWith(b.head)).toBe(true);
      expect(b.tail.endsWith(`],"page":1,"pageSize":${RECORDS},"total":${RECORDS}}`)).toBe(true);
    }
    // Coarse: eight pages of 40 MB held at once would be far more than 250 MB above where it started.
    const peak = memoryMb(pid, 'VmHWM');
    expect({ before: Math.round(before), peak: Math.round(peak), bounded: peak - before < 250 }).toMatchObject({ bounded: true });
    expect(server.child.exitCode).toBeNull();
    expect((await getJson(`${server.url}/health`)).status).toBe(200);
  }, 180_000);

  /**
   * Issue 9 item 12, the routes that read a whole record to prove, verify, sign a Receipt over or
   * replay it (they too parse and hash it, and the proof sends it back): one really signed record
   * of about 1.8 MB (its parameters and the sandbox's echo of them), CALLS concurrent requests of
   * one caller per route. They take turns at the record-read gate: /health keeps answering, the
   * other caller is served before the first caller's queue has drained, memory stays bounded, and
   * no request is a 500 (on PostgreSQL none waits out the connection pool).
   */
  it(`bounds the routes that read, hash and check a whole record (proof, verify, receipt, replay): ${CALLS} concurrent calls each`, async () => {
    const pid = server.child.pid!;
    const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { amount: 120, currency: 'EUR', blob: 'x'.repeat(900_000) } } });
    const id = tx.businessTransactionId as string;
    const executed = await requestJson('POST', `${server.url}/execute`, owner, tx);
    expect(executed.status).toBe(200);
    expect((await requestJson('GET', `${server.url}/trust-records/${id}`, owner)).bytes).toBeGreaterThan(1_800_000);

    const route = (method: 'GET' | 'POST', path: string, expected: number, gated = true) => ({ method, path, expected, gated });
    const scenarios = [
      // Before any Verification exists: found missing without reading the record, so not gated.
      { name: 'GET /verification/{id}', ...route('GET', `/verification/${id}`, 404, false) },
      { name: 'POST /verify', ...route('POST', '/verify', 200) },
      { name: 'POST /receipt', ...route('POST', '/receipt', 201) },
      { name: 'POST /replay', ...route('POST', '/replay', 200) },
    ];
    const report: Record<string, unknown> = {};
    for (const s of scenarios) {
      const call = (key: TestKey) => requestJson(s.method, `${server.url}${s.path}`, key, s.method === 'POST' ? { businessTransactionId: id } : undefined);
      resetPeak(pid);
      const before = memoryMb(pid, 'VmRSS');
      const health = watchHealth(server.url);
      let lastOwnerDone = 0;
      const owners = Array.from({ length: CALLS }, () => call(owner).then((r) => ((lastOwnerDone = performance.now()), r.status)));
      // The other caller's request (the record is not its own: 404) waits for one turn, not for the queue.
      await new Promise((r) => setTimeout(r, 20));
      const theirs = await call(other);
      const otherDone = performance.now();
      const statuses = await Promise.all(owners);
      const healthMs = await health.stop();
      const grew = Math.round(memoryMb(pid, 'VmHWM') - before);
      report[s.name] = { statuses: [...new Set(statuses)], other: theirs.status, otherBeforeLastOwner: otherDone < lastOwnerDone, healthMs, grewMb: grew };
      expect(report[s.name]).toEqual({ statuses: [s.expected], other: 404, otherBeforeLastOwner: s.gated ? true : expect.any(Boolean), healthMs: expect.any(Number), grewMb: expect.any(Number) });
      expect({ route: s.name, healthMs, bounded: healthMs < HEALTH_MS && grew < GROWTH_MB }).toEqual({ route: s.name, healthMs, bounded: true });
    }

    // The proof sends the whole record back: slow readers hold their places while they read.
    resetPeak(pid);
    const before = memoryMb(pid, 'VmRSS');
    const health = watchHealth(server.url);
    const readers = Array.from({ length: CALLS }, () => slowGet(`${server.url}/trust-records/${id}/proof`, owner));
    await Promise.all(readers.slice(0, 2).map((r) => r.started));
    const theirs = await requestJson('GET', `${server.url}/trust-records/${id}/proof`, other);
    expect(theirs.status).toBe(404);
    for (const r of readers) void r.started.then(() => r.resume());
    const bodies = await Promise.all(readers.map((r) => r.body));
    const healthMs = await health.stop();
    const grew = Math.round(memoryMb(pid, 'VmHWM') - before);
    for (const b of bodies) {
      if (b instanceof Error) throw b;
      expect(b.status).toBe(200);
      expect(b.head.startsWith('{"trustRecord":{"assessment":{')).toBe(true);
      expect(b.bytes).toBeGreaterThan(1_800_000);
    }
    report['GET /trust-records/{id}/proof'] = { healthMs, grewMb: grew };
    expect({ route: 'proof', healthMs, bounded: healthMs < HEALTH_MS && grew < GROWTH_MB }).toEqual({ route: 'proof', healthMs, bounded: true });
    expect(server.child.exitCode).toBeNull();
    process.stdout.write(`large record routes on ${db.name}: ${JSON.stringify(report)}\n`);
  }, 300_000);
});

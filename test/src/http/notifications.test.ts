import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { Webhook } from 'standardwebhooks';
import { loadSettings, startServer, type RunningServer } from '@ets/server';
import { silentLogger } from '@ets/domain';
import {
  apiKeysEnv,
  bearer,
  makeKey,
  postgresTarget,
  restartTestServer,
  STORAGE_TARGETS,
  startTestNetwork,
  startTestServer,
  type TestHttpsServer,
  type TestKey,
  type TestNetwork,
  type TestServer,
} from '@ets/test-support';
import { policyDoc } from './governance-fixtures.js';

/**
 * Notifications of new pending items (CONTRACT "Notifications") through the whole service: a real
 * HTTPS receiver on loopback reached through the service's egress (test DNS and CA), every request
 * verified with the official Standard Webhooks SDK.
 */
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const PUBLIC_URL = 'https://ets.example.test/approvals';
const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });

interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
  event: { type: string; item: { kind: string; id: string; summary: string; consoleUrl: string }; createdAt: string };
  status: number;
}

/** A webhook receiver whose answers a test scripts: `ok` (200), `fail` (500), or `hang` (answered when the test says). */
class Receiver {
  readonly deliveries: Delivery[] = [];
  readonly script: ('ok' | 'fail' | 'hang')[] = [];
  readonly hanging: ServerResponse[] = [];
  server!: TestHttpsServer;
  private readonly sdk = new Webhook(SECRET);

  async start(network: TestNetwork, host: string): Promise<this> {
    this.server = await network.https(host, (req, res, body) => {
      // Verified before anything else: a request that does not verify fails the test.
      const event = this.sdk.verify(body, req.headers as Record<string, string>) as Delivery['event'];
      const mode = this.script.shift() ?? 'ok';
      const status = mode === 'fail' ? 500 : 200;
      this.deliveries.push({ headers: req.headers, body, event, status: mode === 'hang' ? 0 : status });
      if (mode === 'hang') {
        this.hanging.push(res);
        return;
      }
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{}');
    });
    return this;
  }

  url(): string {
    return this.server.url('/ets/hooks?token=s3cret');
  }

  of(id: string): Delivery[] {
    return this.deliveries.filter((d) => d.event.item.id === id);
  }
}

/** Polls `check` until it holds (or fails the test after `timeoutMs`): deliveries happen in the background. */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 40_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

const env = (network: TestNetwork, receiver: Receiver) => ({
  ...apiKeysEnv(alice, bob),
  ...network.env,
  SVC_NOTIFY_WEBHOOK_URLS: receiver.url(),
  SVC_NOTIFY_WEBHOOK_SECRET: SECRET,
  SVC_PUBLIC_URL: PUBLIC_URL,
});

const propose = async (url: string, path: string, body: unknown, key: TestKey = alice): Promise<{ id: string; createdAt: string }> => {
  const res = await request(url).post(path).set('authorization', bearer(key)).send(body as object);
  expect(`${path}: ${res.status}`).toBe(`${path}: 201`);
  return res.body as { id: string; createdAt: string };
};
let version = 0;
const proposePolicy = (url: string, name = 'gov-test') => {
  const v = `${++version}.0.0`;
  return propose(url, `/policies/${name}/${v}/pending-changes`, { proposedContent: policyDoc(v, { name }), reason: 'notify' });
};

describe.each(STORAGE_TARGETS)('notifications of new pending items on $name', (factory) => {
  let network: TestNetwork;
  let receiver: Receiver;
  let server: TestServer;
  const notices = async () => Number(((await server.dataSource.query('SELECT COUNT(*) AS n FROM pending_item_notices')) as { n: string | number }[])[0]!.n);

  beforeAll(async () => {
    network = await startTestNetwork();
    receiver = await new Receiver().start(network, 'hooks.notify.test');
    server = await startTestServer(factory, env(network, receiver));
  });
  afterAll(async () => {
    for (const res of receiver?.hanging ?? []) res.destroy();
    await server?.destroy();
    await network?.close();
  });

  it('announces a new change of every kind once, signed, with the contract payload and a console link', async () => {
    network.dns.set('connector.notify.test', { A: [network.address()] });
    network.dns.set('source.notify.test', { A: [network.address()] });
    const changes = {
      policy: await proposePolicy(server.url),
      'authority-grant': await propose(server.url, '/authority-grants/changes', {
        kind: 'grant',
        grantee: 'agent-7',
        action: 'sandbox:echo',
        limits: [],
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
        reason: 'pays',
      }),
      'external-connector': await propose(server.url, '/external-connectors/changes', {
        kind: 'register',
        capability: 'payments:notify',
        endpoint: 'https://connector.notify.test/release',
        policyName: 'gov-test',
        forwardedParameters: ['amount'],
        reason: 'pays',
      }),
      'business-signal-source': await propose(server.url, '/business-signal-sources/changes', { kind: 'register', name: 'erp', endpoint: 'https://source.notify.test/facts', reason: 'facts' }),
    };
    for (const [kind, change] of Object.entries(changes)) {
      await until(`the ${kind} change is announced`, () => receiver.of(change.id).length > 0);
      const [d] = receiver.of(change.id);
      expect(d!.event).toEqual({
        type: 'pending.created',
        item: { kind, id: change.id, summary: expect.any(String), consoleUrl: `${PUBLIC_URL}/console#/items/${kind}/${change.id}` },
        createdAt: change.createdAt,
      });
      expect(d!.event.item.summary.length).toBeGreaterThan(0);
      expect(d!.headers['webhook-id']).toMatch(/^msg_[0-9a-f-]{36}$/);
      expect(d!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    }
    // The shipped policy proposed by the system at start is a pending item too.
    expect(receiver.deliveries.some((d) => d.event.item.kind === 'policy' && d.event.item.summary.includes('payments-transfer'))).toBe(true);
    await until('the outbox is empty', async () => (await notices()) === 0);
    for (const change of Object.values(changes)) expect(receiver.of(change.id)).toHaveLength(1);
    // A refused proposal announces nothing.
    const before = receiver.deliveries.length;
    const refused = await request(server.url).post('/authority-grants/changes').set('authorization', bearer(alice)).send({ kind: 'grant', grantee: 'alice', action: 'sandbox:echo', limits: [], expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(refused.status).toBe(403);
    expect(await notices()).toBe(0);
    expect(receiver.deliveries.length).toBe(before);
  });

  it('a receiver that hangs never delays a proposal: others are answered while it holds the delivery', async () => {
    receiver.script.push('hang');
    const first = await proposePolicy(server.url);
    await until('the receiver holds the first delivery', () => receiver.hanging.length === 1 && receiver.of(first.id).length === 1);
    // While the delivery hangs, proposals are answered as ever (201), and stored with their notice.
    const second = await proposePolicy(server.url);
    const third = await proposePolicy(server.url);
    expect(receiver.hanging[0]!.writableEnded).toBe(false);
    expect(await notices()).toBeGreaterThanOrEqual(2);
    const held = receiver.hanging.shift()!;
    held.writeHead(200, { 'content-type': 'application/json' });
    held.end('{}');
    await until('every notice is delivered', async () => (await notices()) === 0 && receiver.of(second.id).length === 1 && receiver.of(third.id).length === 1);
    expect(receiver.of(first.id)).toHaveLength(1);
  });

  it('a notice not delivered when the process stops is delivered after a restart, with the same id', async () => {
    receiver.script.push('fail');
    const change = await proposePolicy(server.url);
    await until('the first attempt failed', () => receiver.of(change.id).length === 1);
    await until('the failure is recorded', async () => {
      const [row] = (await server.dataSource.query('SELECT attempts FROM pending_item_notices')) as { attempts: number | string }[];
      return Number(row?.attempts) === 1;
    });
    server = await restartTestServer(server);
    // Retried after its backoff (5 s), by the new process.
    await until('the restarted service delivered it', () => receiver.of(change.id).length === 2);
    const [failed, delivered] = receiver.of(change.id);
    expect(failed!.status).toBe(500);
    expect(delivered!.status).toBe(200);
    expect(delivered!.headers['webhook-id']).toBe(failed!.headers['webhook-id']);
    expect(delivered!.body).toBe(failed!.body);
    await until('the outbox is empty', async () => (await notices()) === 0);
  });
});

describe('notifications with two instances on one PostgreSQL', () => {
  let network: TestNetwork;
  let receiver: Receiver;
  let first: TestServer;
  let second: RunningServer;

  beforeAll(async () => {
    network = await startTestNetwork();
    receiver = await new Receiver().start(network, 'hooks.two.notify.test');
    first = await startTestServer(postgresTarget, env(network, receiver));
    // The same database and data dir (one signing key), as instances of one deployment.
    second = await startServer(
      loadSettings({ SVC_PORT: '0', SVC_LOG_LEVEL: 'silent', SVC_DATA_DIR: first.settings.dataDir, SVC_DATABASE_URL: (first.db.target as { url: string }).url, ...env(network, receiver) }),
      silentLogger,
    );
  });
  afterAll(async () => {
    await second?.close();
    await first?.destroy();
    await network?.close();
  });

  it('delivers each new item once, whichever instance stored it, while both deliver', async () => {
    const proposed = await Promise.all(Array.from({ length: 16 }, (_, i) => proposePolicy(i % 2 ? second.url : first.url, `notify-two-${i}`)));
    await until('every item is announced', () => proposed.every((c) => receiver.of(c.id).length > 0));
    await until('the outbox is empty', async () => Number(((await first.dataSource.query('SELECT COUNT(*) AS n FROM pending_item_notices')) as { n: string }[])[0]!.n) === 0);
    for (const c of proposed) expect(receiver.of(c.id)).toHaveLength(1);
    const ids = receiver.deliveries.map((d) => d.headers['webhook-id']);
    expect(new Set(ids).size).toBe(ids.length);
    // Both instances started; the shipped policy was proposed (and announced) once.
    expect(receiver.deliveries.filter((d) => d.event.item.summary.includes('payments-transfer'))).toHaveLength(1);
  });
});

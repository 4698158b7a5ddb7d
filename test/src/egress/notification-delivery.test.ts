import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';
import { HttpsEgress } from '@ets/adapters-connectors';
import { StandardWebhookSigner } from '@ets/adapters-crypto';
import { createDataSource, migrate, TypeOrmNoticeOutbox, TypeOrmPendingChangeStore } from '@ets/adapters-persistence';
import { NoticeDelivery, WebhookNotices, type PendingChange } from '@ets/domain';
import { governanceEvent, STORAGE_TARGETS, startTestNetwork, type ProvisionedTarget, type TestHttpsServer, type TestNetwork } from '@ets/test-support';

/**
 * The worker that delivers notifications, with the parts the service composes (the outbox on
 * both stores, the egress, the signer) against a real HTTPS receiver on loopback, and a clock the
 * test moves: retries and their backoff without sleeping. Every request the receiver gets is
 * verified with the official Standard Webhooks SDK.
 */
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const ids = { uuid: () => randomUUID() };

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

describe.each(STORAGE_TARGETS)('delivering notifications to a real HTTPS receiver on $name', (factory) => {
  let network: TestNetwork;
  let db: ProvisionedTarget;
  let ds: DataSource;
  let egress: HttpsEgress;
  let receiver: TestHttpsServer;
  const received: Received[] = [];
  /** The statuses the receiver answers, in order; 200 once they are used up. */
  const statuses: number[] = [];

  beforeAll(async () => {
    network = await startTestNetwork();
    receiver = await network.https('hooks.notify.test', (req, res, body) => {
      received.push({ headers: req.headers, body });
      res.writeHead(statuses.shift() ?? 200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    egress = new HttpsEgress({ dnsServers: [network.dns.address], allowCidrs: ['127.0.0.0/8'], extraCaPem: network.ca.certificatePem });
    db = await factory.provision();
    ds = createDataSource(db.target);
    await ds.initialize();
    await migrate(ds);
  });
  afterAll(async () => {
    await ds?.destroy();
    await db?.drop();
    await network?.close();
  });

  it('a receiver that fails twice gets the notice on the third attempt, after the backoff, each attempt signed as Standard Webhooks says', async () => {
    const clock = { t: Date.now(), now() { return new Date(this.t); } };
    // A path and query that may hold a credential: reports and logs name the host only.
    const endpoint = receiver.url('/ets/hooks?token=t0ps3cret');
    const notifier = new WebhookNotices({ endpoints: [endpoint], publicBase: 'https://ets.example.com', ids });
    const change: PendingChange = { id: randomUUID(), kind: 'policy', subject: 'p/2', payload: {}, status: 'PENDING_APPROVAL', proposer: 'alice', createdAt: clock.now().toISOString() };
    const [notice] = notifier.noticesOf({ kind: 'policy', id: change.id, summary: "publish policy 'p' version '2'", createdAt: change.createdAt });
    expect(await new TypeOrmPendingChangeStore(ds).create(change, governanceEvent(), [notice!])).toBe(true);

    const delivery = new NoticeDelivery({ outbox: new TypeOrmNoticeOutbox(ds), egress, signer: new StandardWebhookSigner(SECRET), clock, ids });
    statuses.push(500, 503);
    received.length = 0;
    const t0 = clock.t;
    expect(await delivery.deliverDue()).toEqual([expect.objectContaining({ outcome: 'retry', attempts: 1, error: 'answered 500', host: `hooks.notify.test:${receiver.port}` })]);
    expect(await delivery.deliverDue()).toEqual([]); // not due before its backoff
    clock.t += 4_999;
    expect(await delivery.deliverDue()).toEqual([]);
    clock.t += 1;
    expect(await delivery.deliverDue()).toEqual([expect.objectContaining({ outcome: 'retry', attempts: 2, error: 'answered 503' })]);
    clock.t += 30_000;
    expect(await delivery.deliverDue()).toEqual([expect.objectContaining({ outcome: 'delivered', attempts: 3 })]);
    expect(await delivery.deliverDue()).toEqual([]);
    expect(await ds.query('SELECT delivery_id FROM pending_item_notices')).toEqual([]);

    expect(received).toHaveLength(3);
    const sdk = new Webhook(SECRET);
    for (const [i, r] of received.entries()) {
      expect(r.headers['webhook-id']).toBe(notice!.messageId);
      expect(r.headers['webhook-timestamp']).toBe(String(Math.floor((t0 + [0, 5_000, 35_000][i]!) / 1000)));
      expect(r.headers['content-type']).toBe('application/json');
      expect(sdk.verify(r.body, r.headers as Record<string, string>)).toEqual({
        type: 'pending.created',
        item: { kind: 'policy', id: change.id, summary: "publish policy 'p' version '2'", consoleUrl: `https://ets.example.com/console#/items/policy/${change.id}` },
        createdAt: change.createdAt,
      });
      // The signature is over these exact bytes: another secret, or one byte more, does not verify.
      expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(r.body, r.headers as Record<string, string>)).toThrow();
      expect(() => sdk.verify(`${r.body} `, r.headers as Record<string, string>)).toThrow();
    }
  });

});

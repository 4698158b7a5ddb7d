import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { TypeOrmAuthorityGrantStore, TypeOrmSignalSourceStore, TypeOrmSingleUseLedger } from '@ets/adapters-persistence';
import type { AuthorityGrant, SignalSourceRegistration } from '@ets/domain';
import { STORAGE_TARGETS, twoConnections } from '@ets/test-support';

const iso = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

const grant = (over: Partial<AuthorityGrant> = {}): AuthorityGrant => ({
  grantId: randomUUID(),
  grantee: 'agent-7',
  action: 'pay:transfer',
  limits: [{ path: 'intent.parameters.amount', max: 1000 }],
  expiresAt: iso(3_600_000),
  proposer: 'alice',
  approvedBy: 'bob',
  grantedAt: iso(0),
  ...over,
});

const source = (name: string, over: Partial<SignalSourceRegistration> = {}): SignalSourceRegistration => ({
  registrationId: randomUUID(),
  name,
  endpoint: 'https://erp.example.com/facts',
  publicKey: null,
  keyId: null,
  proposer: 'alice',
  approvedBy: 'bob',
  registeredAt: iso(0),
  ...over,
});

/** Two connections (two DataSources) on one database: what two instances of the service share. */
describe.each(STORAGE_TARGETS)('business validation stores on $name', (factory) => {
  let sources: DataSource[] = [];
  let close: () => Promise<void> = async () => undefined;

  beforeAll(async () => {
    ({ sources, close } = await twoConnections(factory));
  });
  afterAll(async () => {
    await close();
  });

  describe('single-use ids (approvals, source nonces)', () => {
    it('accepts an id once; of concurrent uses on two connections exactly one is the first', async () => {
      const [a, b] = sources.map((ds) => new TypeOrmSingleUseLedger(ds));
      for (let round = 0; round < 5; round++) {
        const id = randomUUID();
        const results = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? a! : b!).consume('approval', id, iso(0))));
        expect(results.filter(Boolean)).toHaveLength(1);
        expect(await a!.consume('approval', id, iso(0))).toBe(false);
      }
    });

    it('keeps scopes apart', async () => {
      const ledger = new TypeOrmSingleUseLedger(sources[0]!);
      const id = randomUUID();
      expect(await ledger.consume('approval', id, iso(0))).toBe(true);
      expect(await ledger.consume('source-nonce', id, iso(0))).toBe(true);
      expect(await ledger.consume('source-nonce', id, iso(0))).toBe(false);
    });
  });

  describe('authority grants', () => {
    it('activates idempotently, finds a grantee’s grants for an action (latest expiry first), revokes once', async () => {
      const store = new TypeOrmAuthorityGrantStore(sources[0]!);
      const other = new TypeOrmAuthorityGrantStore(sources[1]!);
      const grantee = `agent-${randomUUID()}`;
      const soon = grant({ grantee, expiresAt: iso(60_000) });
      const later = grant({ grantee, expiresAt: iso(7_200_000), limits: [{ path: 'intent.parameters.currency', oneOf: ['EUR', 1, true] }] });
      const expired = grant({ grantee, expiresAt: iso(-1000) });
      const elsewhere = grant({ grantee, action: 'pay:refund' });
      for (const g of [soon, later, expired, elsewhere]) await store.activate(g);
      await other.activate(soon);
      expect(await store.get(later.grantId)).toEqual(later);
      expect((await store.forGrantee(grantee, 'pay:transfer')).map((g) => g.grantId)).toEqual([later.grantId, soon.grantId, expired.grantId]);

      const at = iso(0);
      await Promise.all([store.revoke(later.grantId, at, 'chg-1'), other.revoke(later.grantId, iso(5), 'chg-2')]);
      expect((await store.get(later.grantId))?.revokedAt).toBeDefined();
      expect((await store.forGrantee(grantee, 'pay:transfer')).map((g) => g.grantId)).toEqual([soon.grantId, expired.grantId]);
    });

    it('lists the grants in force: neither revoked nor expired, page by page', async () => {
      const store = new TypeOrmAuthorityGrantStore(sources[0]!);
      const grantee = `list-${randomUUID()}`;
      const inForce = [grant({ grantee, action: 'a:b' }), grant({ grantee, action: 'a:c' }), grant({ grantee, action: 'a:d' })];
      const expired = grant({ grantee, expiresAt: iso(-1) });
      const revoked = grant({ grantee });
      for (const g of [...inForce, expired, revoked]) await store.activate(g);
      await store.revoke(revoked.grantId, iso(0), 'chg');
      const all = await store.listInForce(iso(0), 1, 100);
      const mine = all.items.filter((g) => g.grantee === grantee).map((g) => g.grantId);
      expect(mine).toEqual(inForce.map((g) => g.grantId));
      const page = await store.listInForce(iso(0), 2, 1);
      expect(page).toMatchObject({ page: 2, pageSize: 1, total: all.total, items: [all.items[1]] });
    });
  });

  describe('business signal sources', () => {
    it('keeps at most one active source per name, also when two activations race on two connections', async () => {
      const [a, b] = sources.map((ds) => new TypeOrmSignalSourceStore(ds));
      const name = `race-${randomUUID().slice(0, 8)}`;
      const first = source(name, { publicKey: '-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n', keyId: 'ed25519:x' });
      const second = source(name);
      const results = await Promise.all([a!.activate(first), b!.activate(second)]);
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results[0] ? first : second;
      expect(await a!.active(name)).toEqual(winner);
      expect(await a!.activate(winner)).toBe(true); // a retried apply is done
      await b!.revoke(winner.registrationId, iso(0), 'chg');
      expect(await a!.active(name)).toBeUndefined();
      const next = source(name);
      expect(await a!.activate(next)).toBe(true);
      const listed = await a!.listActive(1, 100);
      expect(listed.items.map((s) => s.name)).toEqual([...listed.items.map((s) => s.name)].sort());
      expect(listed.items).toContainEqual(next);
    });
  });
});

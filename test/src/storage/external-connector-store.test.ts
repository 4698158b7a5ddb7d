import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { TypeOrmExternalConnectorStore } from '@ets/adapters-persistence';
import { InMemoryExternalConnectorStore, type ExternalConnectorRegistration, type ExternalConnectorStore } from '@ets/domain';
import { STORAGE_TARGETS, twoConnections } from '@ets/test-support';

const registration = (capability: string, over: Partial<ExternalConnectorRegistration> = {}): ExternalConnectorRegistration => ({
  registrationId: randomUUID(),
  capability,
  endpoint: 'https://api.example.com/release',
  policyName: 'ext-pay',
  forwardedParameters: ['amount', 'currency'],
  timeoutMs: 10000,
  proposer: 'alice',
  approvedBy: 'bob',
  registeredAt: new Date().toISOString(),
  ...over,
});

/** The same contract for every adapter of the port: the in-memory reference and both databases. */
function contract(name: string, open: () => Promise<{ store: ExternalConnectorStore; other: ExternalConnectorStore; close(): Promise<void> }>) {
  describe(`ExternalConnectorStore on ${name}`, () => {
    let store: ExternalConnectorStore;
    let other: ExternalConnectorStore;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ store, other, close } = await open());
    });
    afterAll(async () => {
      await close();
    });

    it('activates a registration, idempotently, and finds it by capability', async () => {
      const r = registration('pay:transfer');
      expect(await store.activate(r)).toBe(true);
      expect(await store.activate(r)).toBe(true);
      expect(await store.active('pay:transfer')).toEqual(r);
      expect(await store.active('pay:refund')).toBeUndefined();
    });

    it('keeps at most one active registration per capability, also when two activations race (two connections)', async () => {
      const a = registration('race:transfer');
      const b = registration('race:transfer');
      const results = await Promise.all([store.activate(a), other.activate(b)]);
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results[0] ? a : b;
      expect(await store.active('race:transfer')).toEqual(winner);
      expect(await store.activate(results[0] ? b : a)).toBe(false);
    });

    it('revoke ends a registration (twice changes nothing); then a new one may be activated', async () => {
      const r = registration('rev:transfer');
      await store.activate(r);
      await store.revoke(r.registrationId, new Date().toISOString(), randomUUID());
      await other.revoke(r.registrationId, new Date().toISOString(), randomUUID());
      expect(await store.active('rev:transfer')).toBeUndefined();
      expect(await store.activate(r)).toBe(true); // its row is stored: a retried apply is still done
      expect(await store.active('rev:transfer')).toBeUndefined();
      const next = registration('rev:transfer');
      expect(await store.activate(next)).toBe(true);
      expect(await store.active('rev:transfer')).toEqual(next);
    });

    it('lists the active registrations by capability, page by page', async () => {
      for (const c of ['list-c:x', 'list-a:x', 'list-b:x']) await store.activate(registration(c));
      const all = await store.listActive(1, 100);
      const caps = all.items.map((r) => r.capability);
      expect(caps).toEqual([...caps].sort());
      expect(caps).not.toContain('rev:never');
      const page2 = await store.listActive(2, 2);
      expect(page2).toMatchObject({ page: 2, pageSize: 2, total: all.total });
      expect(page2.items.map((r) => r.capability)).toEqual(caps.slice(2, 4));
    });
  });
}

contract('memory', async () => {
  const store = new InMemoryExternalConnectorStore();
  return { store, other: store, close: async () => undefined };
});

for (const factory of STORAGE_TARGETS) {
  contract(factory.name, async () => {
    const { sources, close } = await twoConnections(factory);
    return { store: new TypeOrmExternalConnectorStore(sources[0]), other: new TypeOrmExternalConnectorStore(sources[1]), close };
  });
}

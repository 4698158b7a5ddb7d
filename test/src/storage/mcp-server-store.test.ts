import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { TypeOrmMcpServerStore } from '@ets/adapters-persistence';
import { InMemoryMcpServerStore, type McpServerRegistration, type McpServerStore } from '@ets/domain';
import { STORAGE_TARGETS, twoConnections } from '@ets/test-support';

const registration = (name: string, over: Partial<McpServerRegistration> = {}): McpServerRegistration => ({
  registrationId: randomUUID(),
  name,
  url: 'https://mcp.example.com/mcp',
  stdio: null,
  policyName: 'mcp-calls',
  tools: ['*'],
  timeoutMs: 10000,
  proposer: 'alice',
  approvedBy: 'bob',
  registeredAt: new Date().toISOString(),
  ...over,
});

/** The same contract for every adapter of the port: the in-memory reference and both databases. */
function contract(name: string, open: () => Promise<{ store: McpServerStore; other: McpServerStore; close(): Promise<void> }>) {
  describe(`McpServerStore on ${name}`, () => {
    let store: McpServerStore;
    let other: McpServerStore;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ store, other, close } = await open());
    });
    afterAll(async () => {
      await close();
    });

    it('activates a server (url or stdio, its tool list), idempotently, and finds it by name', async () => {
      const web = registration('web', { tools: ['read', 'write.v2'] });
      const local = registration('local', { url: null, stdio: 'everything', timeoutMs: 2500 });
      for (const r of [web, local]) {
        expect(await store.activate(r)).toBe(true);
        expect(await store.activate(r)).toBe(true);
        expect(await other.active(r.name)).toEqual(r);
      }
      expect(await store.active('nobody')).toBeUndefined();
    });

    it('keeps at most one active server per name, also when two activations race (two connections)', async () => {
      const a = registration('race');
      const b = registration('race', { url: null, stdio: 'everything' });
      const results = await Promise.all([store.activate(a), other.activate(b)]);
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await store.active('race')).toEqual(results[0] ? a : b);
      expect(await store.activate(results[0] ? b : a)).toBe(false);
    });

    it('revoke ends a server (twice changes nothing); then a new one may be activated; the list is by name', async () => {
      const r = registration('rev');
      await store.activate(r);
      await store.revoke(r.registrationId, new Date().toISOString(), randomUUID());
      await other.revoke(r.registrationId, new Date().toISOString(), randomUUID());
      expect(await store.active('rev')).toBeUndefined();
      const next = registration('rev');
      expect(await store.activate(next)).toBe(true);
      expect(await store.active('rev')).toEqual(next);
      const names = (await store.listActive(1, 100)).items.map((s) => s.name);
      expect(names).toEqual([...names].sort());
      expect(names.filter((n) => n === 'rev')).toHaveLength(1);
    });
  });
}

contract('memory', async () => {
  const store = new InMemoryMcpServerStore();
  return { store, other: store, close: async () => undefined };
});

for (const factory of STORAGE_TARGETS) {
  contract(factory.name, async () => {
    const { sources, close } = await twoConnections(factory);
    return { store: new TypeOrmMcpServerStore(sources[0]), other: new TypeOrmMcpServerStore(sources[1]), close };
  });
}

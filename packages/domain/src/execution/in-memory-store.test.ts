/**
 * What the in-memory store does beside the contract suite it passes with SQLite and PostgreSQL
 * (test/src/storage/execution-store.test.ts): the log leaves and the request's authentication event
 * it writes with a claim, all or nothing, and its texts with or without a hasher.
 */
import { describe, expect, it } from '@jest/globals';
import { fakeHasher } from '../attestation/testing.js';
import type { AuthEvent } from '../ports/audit.js';
import type { Signed } from '../ports/crypto.js';
import type { LogLeaf } from '../transparency/records.js';
import { InMemoryExecutionStore, type LeafLog } from './in-memory-store.js';
import { DuplicateTransactionError, EVERY_CALLER as ALL, type TransactionClaim } from './ports.js';
import type { SignedRefusal } from './records.js';

const ID = '00000000-0000-4000-8000-000000000001';
const claim: TransactionClaim = { businessTransactionId: ID, callerId: 'agent-7', outcome: 'REFUSED', createdAt: '2025-01-01T00:00:00.000Z' };
const refusal = { recordType: 'refusal-record', businessTransactionId: ID, reason: 'no', detail: JSON.parse('{"__proto__":{"x":1},"b":2,"a":1}'), keyId: 'k1', signature: 's' } as unknown as SignedRefusal;
const event: Signed<AuthEvent> = { eventId: 'ev-1', kind: 'caller-authentication', callerId: 'agent-7', route: '/execute', method: 'POST', outcome: 'SUCCESS', occurredAt: claim.createdAt, keyId: 'k1', signature: 's' };

/** A log that keeps what it was given, or refuses while `failing`. */
function recordingLog() {
  const appended: LogLeaf[][] = [];
  const state = { failing: false };
  const log = {
    append: async (leaves) => {
      if (state.failing) throw new Error('the log is unavailable');
      appended.push([...leaves]);
    },
  } satisfies LeafLog;
  return { log, appended, state };
}

describe('InMemoryExecutionStore', () => {
  it('appends the request\'s event and the record as leaves of the log in the claim\'s write, and keeps the event', async () => {
    const { log, appended } = recordingLog();
    const store = new InMemoryExecutionStore({ hasher: fakeHasher, log });
    await store.storeRefusal(claim, refusal, event);
    expect(appended).toEqual([[fakeHasher.contentHash(event), fakeHasher.contentHash(refusal)]]);
    expect(store.authEvents).toEqual([event]);
    // A duplicate appends nothing and keeps no event.
    await expect(store.storeRefusal(claim, refusal, { ...event, eventId: 'ev-2' })).rejects.toBeInstanceOf(DuplicateTransactionError);
    expect(appended).toHaveLength(1);
    expect(store.authEvents).toHaveLength(1);
  });

  it('stores nothing when the log refuses the leaves: the claim, its record and its leaves together or not at all', async () => {
    const { log, appended, state } = recordingLog();
    const store = new InMemoryExecutionStore({ hasher: fakeHasher, log });
    state.failing = true;
    await expect(store.storeRefusal(claim, refusal, event)).rejects.toThrow('the log is unavailable');
    expect(await store.isClaimed(ID)).toBe(false);
    expect(await store.getRefusal(ID, ALL)).toBeUndefined();
    expect(store.authEvents).toEqual([]);
    state.failing = false;
    await store.storeRefusal(claim, refusal, event);
    expect(appended).toHaveLength(1);
  });

  it('keeps the hasher\'s canonical text, or without one the JSON text; either way the record comes back member for member', async () => {
    const canonical = new InMemoryExecutionStore({ hasher: fakeHasher });
    const plain = new InMemoryExecutionStore();
    for (const store of [canonical, plain]) {
      await store.storeRefusal(claim, refusal);
      const back = (await store.getRefusal(ID, ALL))!;
      expect(back).toEqual(refusal);
      expect(back).not.toBe(refusal);
      expect(Object.keys((back as unknown as { detail: object }).detail).sort()).toEqual(['__proto__', 'a', 'b']);
    }
  });
});

import { beforeEach, describe, expect, it } from '@jest/globals';
import type { Caller, CredentialHolderType } from '../identity/caller.js';
import type { PendingChange } from './change.js';
import { GovernanceAudit } from './governance-audit.js';
import { InMemoryPendingChangeStore } from './in-memory.js';
import { APPLY_LEASE_MS, MakerChecker } from './maker-checker.js';
import type { ChangeApplier } from './ports.js';
import { fakeSigner as signer, fakeStepUpSign as fakeSign, fakeStepUpVerifier as verifier } from './testing.js';

// ---- fakes: no infrastructure, no real crypto --------------------------------------------------

class FakeClock {
  t = Date.parse('2026-11-21T12:00:00.000Z');
  now = (): Date => new Date(this.t);
  advance(ms: number): void {
    this.t += ms;
  }
}

let counter = 0;
const ids = { uuid: () => `00000000-0000-4000-8000-${String(++counter).padStart(12, '0')}` };
const nonce = (): string => `nonce-${String(++counter).padStart(20, '0')}`;

/** The governance events the store kept, each with the change it records (same transaction). */
const audit = { get events() { return store.events; } };

/** A kind of change for the tests: sets a value in a map. */
interface Widget {
  name: string;
  value: number;
}
class WidgetApplier implements ChangeApplier<Widget> {
  readonly applied = new Map<string, number>();
  calls = 0;
  failNext = 0;
  /** While set, every apply waits for it (an apply still running while other requests arrive). */
  gate?: Promise<void>;
  async apply(change: PendingChange<Widget>): Promise<void> {
    this.calls++;
    if (this.gate) await this.gate;
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('connection lost while applying');
    }
    this.applied.set(change.payload.name, change.payload.value);
  }
}

const human = (callerId: string, stepUp = true): Caller => ({
  callerId,
  credentialHolderType: 'USER',
  allowedCapabilities: [],
  allowedPrincipalIds: [],
  allowedTenantIds: [],
  ...(stepUp ? { stepUpPublicKeyPem: `key-of-${callerId}` } : {}),
});
const nonHuman = (callerId: string, holder?: CredentialHolderType): Caller => ({ ...human(callerId), credentialHolderType: holder });

// ---- setup -------------------------------------------------------------------------------------

let clock: FakeClock;
let store: InMemoryPendingChangeStore;
let applier: WidgetApplier;
let mc: MakerChecker<Widget>;
const alice = human('alice');
const bob = human('bob');
const carol = human('carol');
/** The step-up keys callers hold now, as the key file says: each human's own unless a test says otherwise. */
let held: Record<string, string[]> = {};
const directory = { stepUpKeysOf: (id: string) => held[id] ?? [`key-of-${id}`] };

beforeEach(() => {
  held = {};
  clock = new FakeClock();
  store = new InMemoryPendingChangeStore();
  applier = new WidgetApplier();
  mc = new MakerChecker<Widget>({
    kind: 'widget',
    store,
    applier,
    stepUpVerifier: verifier,
    approvers: directory,
    clock,
    ids,
    audit: new GovernanceAudit(signer, clock, ids),
    describe: (c) => `set ${c.payload.name} to ${c.payload.value}`,
  });
});

/** An envelope as the checker's CLI would make it, valid for 5 minutes. */
function envelope(checker: Caller, changeId: string, action: 'approve' | 'reject', over: Record<string, unknown> = {}, key = checker.stepUpPublicKeyPem!) {
  const payload: Record<string, unknown> = {
    pendingPolicyChangeId: changeId,
    action,
    expiresAt: new Date(clock.t + 300_000).toISOString(),
    nonce: nonce(),
    callerId: checker.callerId,
    ...(action === 'reject' ? { reason: 'Not now' } : {}),
    ...over,
  };
  for (const k of Object.keys(payload)) if (payload[k] === undefined) delete payload[k];
  return { payload, signature: fakeSign(key, payload) };
}

const propose = (by = alice, reason?: string) => mc.propose(by, { payload: { name: 'w', value: 1 }, subject: 'w', reason });

const refusal = (kind: string, code?: string) => expect.objectContaining({ name: 'DomainError', kind, code });

// ---- tests -------------------------------------------------------------------------------------

describe('proposing', () => {
  it('stores a PENDING_APPROVAL change by a USER key and audits it', async () => {
    const change = await propose(alice, 'because');
    expect(change).toEqual({
      id: expect.any(String),
      kind: 'widget',
      subject: 'w',
      payload: { name: 'w', value: 1 },
      status: 'PENDING_APPROVAL',
      proposer: 'alice',
      proposerStepUpKey: 'key-of-alice',
      reason: 'because',
      createdAt: '2026-11-21T12:00:00.000Z',
    });
    expect(await store.get(change.id)).toEqual(change);
    expect(audit.events).toEqual([
      expect.objectContaining({ kind: 'governance', callerId: 'alice', action: 'propose', subjectType: 'widget-change', subjectId: change.id, summary: 'set w to 1', keyId: 'k1' }),
    ]);
  });

  it.each<[CredentialHolderType | undefined]>([['SERVICE'], ['ROLE'], ['ORGANIZATION'], [undefined]])('refuses holder type %s with 403 NON_HUMAN_CALLER_DENIED', async (holder) => {
    await expect(propose(nonHuman('svc', holder))).rejects.toEqual(refusal('forbidden', 'NON_HUMAN_CALLER_DENIED'));
    expect(store.changes.size).toBe(0);
  });

  it('accepts a reason of up to 2000 characters, none, and refuses longer or non-string ones with 400', async () => {
    await expect(mc.propose(alice, { payload: { name: 'a', value: 1 }, reason: 'é'.repeat(2000) })).resolves.toMatchObject({ reason: 'é'.repeat(2000) });
    await expect(mc.propose(alice, { payload: { name: 'b', value: 1 } })).resolves.not.toHaveProperty('reason');
    await expect(mc.propose(alice, { payload: { name: 'c', value: 1 }, reason: 'x'.repeat(2001) })).rejects.toEqual(refusal('invalid', undefined));
    await expect(mc.propose(alice, { payload: { name: 'd', value: 1 }, reason: 42 as unknown as string })).rejects.toEqual(refusal('invalid', undefined));
  });

  it('allows one pending change per subject (409 for a second)', async () => {
    await propose();
    await expect(propose(bob)).rejects.toEqual(refusal('conflict', undefined));
  });

  it('lists by status, oldest first, page by page', async () => {
    const a = await mc.propose(alice, { payload: { name: 'a', value: 1 } });
    clock.advance(1000);
    const b = await mc.propose(alice, { payload: { name: 'b', value: 2 } });
    await mc.approve(b.id, bob, envelope(bob, b.id, 'approve'));
    const ids = async (status: Parameters<typeof mc.page>[0], page = 1, pageSize = 20) => (await mc.page(status, page, pageSize)).items.map((c) => c.id);
    expect(await ids(undefined)).toEqual([a.id, b.id]);
    expect(await ids('PENDING_APPROVAL')).toEqual([a.id]);
    expect(await ids('APPROVED')).toEqual([b.id]);
    expect(await ids('REJECTED')).toEqual([]);
    expect(await ids(undefined, 2, 1)).toEqual([b.id]);
    expect(await mc.page(undefined, 3, 1)).toMatchObject({ items: [], page: 3, pageSize: 1, total: 2 });
  });
});

describe('approving', () => {
  it('approves with a valid envelope from another human, applies once, and audits who and when', async () => {
    const change = await propose();
    clock.advance(60_000);
    const approved = await mc.approve(change.id, bob, envelope(bob, change.id, 'approve'));
    expect(approved).toMatchObject({ status: 'APPROVED', decider: 'bob', decidedAt: '2026-11-21T12:01:00.000Z', appliedAt: '2026-11-21T12:01:00.000Z' });
    expect(approved).not.toHaveProperty('rejectionReason');
    expect(applier.applied.get('w')).toBe(1);
    expect(applier.calls).toBe(1);
    expect(audit.events.map((e) => [e.action, e.callerId, e.occurredAt])).toEqual([
      ['propose', 'alice', '2026-11-21T12:00:00.000Z'],
      ['approve', 'bob', '2026-11-21T12:01:00.000Z'],
    ]);
  });

  it('accepts an envelope without callerId (the signature already binds it to the checker key)', async () => {
    const change = await propose();
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve', { callerId: undefined }))).resolves.toMatchObject({ status: 'APPROVED' });
  });

  it('refuses a checker whose step-up key the proposer held when proposing, or holds now (403 SELF_APPROVAL_DENIED), compared as keys', async () => {
    // alice proposes with her key; later the key file gives the same key to 'alice-2' (alice's key removed).
    const change = await propose(alice);
    expect(change.proposerStepUpKey).toBe('key-of-alice');
    expect(await store.get(change.id)).toMatchObject({ proposerStepUpKey: 'key-of-alice' });
    held = { alice: [] };
    const alice2 = { ...human('alice-2'), stepUpPublicKeyPem: '  key-of-alice\n' };
    await expect(mc.approve(change.id, alice2, envelope(alice2, change.id, 'approve'))).rejects.toEqual(refusal('forbidden', 'SELF_APPROVAL_DENIED'));
    await expect(mc.reject(change.id, alice2, envelope(alice2, change.id, 'reject'))).rejects.toEqual(refusal('forbidden', 'SELF_APPROVAL_DENIED'));

    // dave proposed without a step-up key and holds one now, the same as erin's.
    const other = await mc.propose(human('dave', false), { payload: { name: 'd', value: 1 }, subject: 'd' });
    expect(other).not.toHaveProperty('proposerStepUpKey');
    held = { dave: ['shared'] };
    const erin = { ...human('erin'), stepUpPublicKeyPem: 'shared' };
    await expect(mc.approve(other.id, erin, envelope(erin, other.id, 'approve'))).rejects.toEqual(refusal('forbidden', 'SELF_APPROVAL_DENIED'));
    expect((await store.get(change.id))!.status).toBe('PENDING_APPROVAL');
    expect((await store.get(other.id))!.status).toBe('PENDING_APPROVAL');
    expect(applier.calls).toBe(0);
    // Another key decides both.
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))).resolves.toMatchObject({ status: 'APPROVED' });
    await expect(mc.approve(other.id, bob, envelope(bob, other.id, 'approve'))).resolves.toMatchObject({ status: 'APPROVED' });
  });

  it('lets any human approve a change proposed by the system', async () => {
    const change = await mc.proposeAsSystem({ payload: { name: 's', value: 9 }, reason: 'shipped' });
    expect(change.proposer).toBe('system');
    await expect(mc.approve(change.id, alice, envelope(alice, change.id, 'approve'))).resolves.toMatchObject({ status: 'APPROVED', decider: 'alice' });
  });
});

describe('the governance event is stored with what it records, or neither is', () => {
  /** A maker-checker on the same store whose signer is down. */
  const withoutSigner = () =>
    new MakerChecker<Widget>({
      kind: 'widget',
      store,
      applier,
      stepUpVerifier: verifier,
      approvers: directory,
      clock,
      ids,
      audit: new GovernanceAudit({ ...signer, sign: async () => Promise.reject(new Error('signer down')) }, clock, ids),
      describe: (c) => `set ${c.payload.name} to ${c.payload.value}`,
    });

  it('signs before storing: no signature, no proposal and no decision (503 AUDIT_UNAVAILABLE), and the nonce stays unused', async () => {
    await expect(withoutSigner().propose(alice, { payload: { name: 'w', value: 1 }, subject: 'w' })).rejects.toEqual(refusal('unavailable', 'AUDIT_UNAVAILABLE'));
    expect(store.changes.size).toBe(0);
    const change = await propose();
    const first = envelope(bob, change.id, 'approve');
    await expect(withoutSigner().approve(change.id, bob, first)).rejects.toEqual(refusal('unavailable', 'AUDIT_UNAVAILABLE'));
    expect(await store.get(change.id)).toMatchObject({ status: 'PENDING_APPROVAL' });
    expect(store.nonces.size).toBe(0);
    // The same envelope, once the signer is back, decides.
    await expect(mc.approve(change.id, bob, first)).resolves.toMatchObject({ status: 'APPROVED' });
    expect(audit.events.map((e) => [e.action, e.subjectId])).toEqual([
      ['propose', change.id],
      ['approve', change.id],
    ]);
  });

  it('keeps the event of the winning decision only: a refused proposal and a lost decision store none', async () => {
    const change = await propose();
    await expect(propose(bob)).rejects.toEqual(refusal('conflict', undefined));
    const results = await Promise.allSettled([mc.approve(change.id, bob, envelope(bob, change.id, 'approve')), mc.reject(change.id, carol, envelope(carol, change.id, 'reject'))]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(audit.events.map((e) => e.action)).toEqual(['propose', (await store.get(change.id))!.status === 'APPROVED' ? 'approve' : 'reject']);
    // The event's time is the decision's.
    expect(audit.events[1]!.occurredAt).toBe((await store.get(change.id))!.decidedAt);
  });
});

describe('refusals (each leaves the change pending and applies nothing)', () => {
  let change: PendingChange<Widget>;
  beforeEach(async () => {
    change = await propose();
  });
  const stillPending = async () => {
    expect(await store.get(change.id)).toMatchObject({ status: 'PENDING_APPROVAL' });
    expect(applier.calls).toBe(0);
  };

  it.each<[CredentialHolderType | undefined]>([['SERVICE'], ['ROLE'], ['ORGANIZATION'], [undefined]])('403 NON_HUMAN_CALLER_DENIED for holder type %s', async (holder) => {
    const svc = nonHuman('svc', holder);
    await expect(mc.approve(change.id, svc, envelope(svc, change.id, 'approve'))).rejects.toEqual(refusal('forbidden', 'NON_HUMAN_CALLER_DENIED'));
    await stillPending();
  });

  it('403 NON_HUMAN_CALLER_DENIED for a USER key without a registered step-up key', async () => {
    const dave = human('dave', false);
    await expect(mc.approve(change.id, dave, envelope(dave, change.id, 'approve', {}, 'key-of-dave'))).rejects.toEqual(refusal('forbidden', 'NON_HUMAN_CALLER_DENIED'));
    await stillPending();
  });

  it.each<[string, (e: { payload: Record<string, unknown>; signature: string }) => unknown]>([
    ['no body', () => undefined],
    ['an array', () => []],
    ['no payload', (e) => ({ signature: e.signature })],
    ['a string payload', (e) => ({ payload: 'x', signature: e.signature })],
    ['no signature', (e) => ({ payload: e.payload })],
    ['an empty signature', (e) => ({ payload: e.payload, signature: '' })],
    ['no pendingPolicyChangeId', (e) => ({ ...e, payload: { ...e.payload, pendingPolicyChangeId: undefined } })],
    ['a numeric action', (e) => ({ ...e, payload: { ...e.payload, action: 1 } })],
    ['no expiresAt', (e) => ({ ...e, payload: { ...e.payload, expiresAt: undefined } })],
    ['an expiresAt that is not RFC 3339', (e) => ({ ...e, payload: { ...e.payload, expiresAt: 'tomorrow' } })],
    ['an expiresAt on a day that does not exist', (e) => ({ ...e, payload: { ...e.payload, expiresAt: '2026-11-31T12:05:00Z' } })],
    ['an expiresAt at 24:00', (e) => ({ ...e, payload: { ...e.payload, expiresAt: '2026-11-20T24:00:00Z' } })],
    ['an expiresAt in a leap second', (e) => ({ ...e, payload: { ...e.payload, expiresAt: '2026-11-21T12:04:60Z' } })],
    ['an expiresAt more than 15 minutes ahead', (e) => ({ ...e, payload: { ...e.payload, expiresAt: '2026-11-21T12:15:00.001Z' } })],
    ['an expiresAt in year 9999', (e) => ({ ...e, payload: { ...e.payload, expiresAt: '9999-12-31T23:59:59Z' } })],
    ['no nonce', (e) => ({ ...e, payload: { ...e.payload, nonce: undefined } })],
    ['a nonce of under 16 bytes', (e) => ({ ...e, payload: { ...e.payload, nonce: 'AAAAAAAAAAAAAAAAAAAAA' } })],
    ['a nonce that is not base64url', (e) => ({ ...e, payload: { ...e.payload, nonce: 'not base64url at all, has spaces' } })],
    ['an empty callerId', (e) => ({ ...e, payload: { ...e.payload, callerId: '' } })],
    ['a reason over 2000 characters', (e) => ({ ...e, payload: { ...e.payload, reason: 'x'.repeat(2001) } })],
  ])('400 without a code for a malformed envelope: %s', async (_what, mutate) => {
    const body = mutate(envelope(bob, change.id, 'approve'));
    await expect(mc.approve(change.id, bob, body)).rejects.toEqual(refusal('invalid', undefined));
    await stillPending();
  });

  it('accepts an expiresAt exactly 15 minutes ahead, in any offset', async () => {
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve', { expiresAt: '2026-11-21T13:15:00+01:00' }))).resolves.toMatchObject({ status: 'APPROVED' });
  });

  it('accepts an expiresAt with more than nine fraction digits (RFC 3339 sets no bound)', async () => {
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve', { expiresAt: '2026-11-21T12:05:00.1234567890Z' }))).resolves.toMatchObject({ status: 'APPROVED' });
  });

  it('400 for a reject envelope without a reason', async () => {
    await expect(mc.reject(change.id, bob, envelope(bob, change.id, 'reject', { reason: undefined }))).rejects.toEqual(refusal('invalid', undefined));
    await expect(mc.reject(change.id, bob, envelope(bob, change.id, 'reject', { reason: '  ' }))).rejects.toEqual(refusal('invalid', undefined));
    await stillPending();
  });

  it('403 STEP_UP_INVALID when the signature does not verify against the checker key', async () => {
    const tampered = envelope(bob, change.id, 'approve');
    tampered.payload.expiresAt = new Date(clock.t + 600_000).toISOString();
    await expect(mc.approve(change.id, bob, tampered)).rejects.toEqual(refusal('forbidden', 'STEP_UP_INVALID'));
    // Signed with someone else's key (carol's), presented by bob.
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve', {}, 'key-of-carol'))).rejects.toEqual(refusal('forbidden', 'STEP_UP_INVALID'));
    await stillPending();
  });

  it('403 STEP_UP_INVALID when pendingPolicyChangeId is not the change in the URL', async () => {
    const other = await mc.propose(alice, { payload: { name: 'other', value: 2 } });
    await expect(mc.approve(change.id, bob, envelope(bob, other.id, 'approve'))).rejects.toEqual(refusal('forbidden', 'STEP_UP_INVALID'));
    await stillPending();
  });

  it('403 STEP_UP_INVALID when the action is not the endpoint', async () => {
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'reject'))).rejects.toEqual(refusal('forbidden', 'STEP_UP_INVALID'));
    await expect(mc.reject(change.id, bob, envelope(bob, change.id, 'approve', { reason: 'x' }))).rejects.toEqual(refusal('forbidden', 'STEP_UP_INVALID'));
    await stillPending();
  });

  it('403 STEP_UP_INVALID when callerId is not the authenticated caller', async () => {
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve', { callerId: 'carol' }))).rejects.toEqual(refusal('forbidden', 'STEP_UP_INVALID'));
    await stillPending();
  });

  it('403 STEP_UP_EXPIRED once expiresAt has passed (the fake clock moves, nothing sleeps)', async () => {
    const e = envelope(bob, change.id, 'approve');
    clock.advance(300_000); // exactly at expiresAt: expired
    await expect(mc.approve(change.id, bob, e)).rejects.toEqual(refusal('forbidden', 'STEP_UP_EXPIRED'));
    const earlier = envelope(bob, change.id, 'approve', { expiresAt: new Date(clock.t - 1).toISOString() });
    await expect(mc.approve(change.id, bob, earlier)).rejects.toEqual(refusal('forbidden', 'STEP_UP_EXPIRED'));
    await stillPending();
    // An expired envelope consumed nothing: a fresh one still works.
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))).resolves.toMatchObject({ status: 'APPROVED' });
  });

  it('409 STEP_UP_NONCE_REUSED for a nonce used before, on any change', async () => {
    const other = await mc.propose(alice, { payload: { name: 'other', value: 2 } });
    const first = envelope(bob, other.id, 'approve');
    await mc.approve(other.id, bob, first);
    const reused = envelope(bob, change.id, 'approve', { nonce: first.payload.nonce });
    await expect(mc.approve(change.id, bob, reused)).rejects.toEqual(refusal('conflict', 'STEP_UP_NONCE_REUSED'));
    await expect(mc.reject(change.id, carol, envelope(carol, change.id, 'reject', { nonce: first.payload.nonce }))).rejects.toEqual(
      refusal('conflict', 'STEP_UP_NONCE_REUSED'),
    );
    expect(await store.get(change.id)).toMatchObject({ status: 'PENDING_APPROVAL' });
  });

  it('404 without a code for an unknown change (or one of another kind)', async () => {
    const id = '00000000-0000-4000-8000-999999999999';
    await expect(mc.approve(id, bob, envelope(bob, id, 'approve'))).rejects.toEqual(refusal('not_found', undefined));
    await store.create({ ...change, id: 'conn-1', kind: 'connector', subject: undefined }, store.events[0]!);
    await expect(mc.approve('conn-1', bob, envelope(bob, 'conn-1', 'approve'))).rejects.toEqual(refusal('not_found', undefined));
  });

  it('403 SELF_APPROVAL_DENIED when the proposer approves or rejects their own change', async () => {
    await expect(mc.approve(change.id, alice, envelope(alice, change.id, 'approve'))).rejects.toEqual(refusal('forbidden', 'SELF_APPROVAL_DENIED'));
    await expect(mc.reject(change.id, alice, envelope(alice, change.id, 'reject'))).rejects.toEqual(refusal('forbidden', 'SELF_APPROVAL_DENIED'));
    await stillPending();
  });
});

describe('decided changes', () => {
  it('rejects with the envelope reason recorded, applies nothing, and audits it', async () => {
    const change = await propose();
    clock.advance(5_000);
    const rejected = await mc.reject(change.id, bob, envelope(bob, change.id, 'reject', { reason: 'Limits too loose' }));
    expect(rejected).toMatchObject({ status: 'REJECTED', decider: 'bob', decidedAt: '2026-11-21T12:00:05.000Z', rejectionReason: 'Limits too loose' });
    expect(rejected).not.toHaveProperty('appliedAt');
    expect(applier.calls).toBe(0);
    expect(audit.events.at(-1)).toMatchObject({ action: 'reject', callerId: 'bob', subjectId: change.id, summary: expect.stringContaining('Limits too loose') });
  });

  it('answers 409 without a code for any decision on a decided change, and changes nothing', async () => {
    const approved = await propose();
    const first = envelope(bob, approved.id, 'approve');
    await mc.approve(approved.id, bob, first);
    // The same envelope again, a new one by the same approver, another approver, a reject.
    await expect(mc.approve(approved.id, bob, first)).rejects.toEqual(refusal('conflict', undefined));
    await expect(mc.approve(approved.id, bob, envelope(bob, approved.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    await expect(mc.approve(approved.id, carol, envelope(carol, approved.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    await expect(mc.reject(approved.id, carol, envelope(carol, approved.id, 'reject'))).rejects.toEqual(refusal('conflict', undefined));
    expect(applier.calls).toBe(1);

    const rejected = await mc.propose(alice, { payload: { name: 'r', value: 1 } });
    await mc.reject(rejected.id, bob, envelope(bob, rejected.id, 'reject'));
    await expect(mc.approve(rejected.id, carol, envelope(carol, rejected.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    await expect(mc.approve(rejected.id, bob, envelope(bob, rejected.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    expect(await store.get(rejected.id)).toMatchObject({ status: 'REJECTED', decider: 'bob' });
  });

  it('applies once when two checkers approve at the same moment: one succeeds, the other gets 409', async () => {
    const change = await propose();
    const results = await Promise.allSettled([
      mc.approve(change.id, bob, envelope(bob, change.id, 'approve')),
      mc.approve(change.id, carol, envelope(carol, change.id, 'approve')),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(lost.reason).toEqual(refusal('conflict', undefined));
    expect(applier.calls).toBe(1);
  });
});

describe('retry after a partial failure', () => {
  it('completes when the same approver retries with a new envelope; anyone else gets 409', async () => {
    const change = await propose();
    applier.failNext = 1;
    const first = envelope(bob, change.id, 'approve');
    await expect(mc.approve(change.id, bob, first)).rejects.toThrow('connection lost while applying');
    const stuck = await store.get(change.id);
    expect(stuck).toMatchObject({ status: 'APPROVED', decider: 'bob' });
    expect(stuck).not.toHaveProperty('appliedAt');
    expect(applier.applied.size).toBe(0);

    // Another checker cannot take over, and the first envelope cannot be replayed.
    await expect(mc.approve(change.id, carol, envelope(carol, change.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    await expect(mc.approve(change.id, bob, first)).rejects.toEqual(refusal('conflict', 'STEP_UP_NONCE_REUSED'));
    await expect(mc.reject(change.id, bob, envelope(bob, change.id, 'reject'))).rejects.toEqual(refusal('conflict', undefined));

    clock.advance(10_000);
    const done = await mc.approve(change.id, bob, envelope(bob, change.id, 'approve'));
    expect(done).toMatchObject({ status: 'APPROVED', decider: 'bob', decidedAt: '2026-11-21T12:00:00.000Z', appliedAt: '2026-11-21T12:00:10.000Z' });
    expect(applier.applied.get('w')).toBe(1);
    expect(audit.events.filter((e) => e.action === 'approve').map((e) => e.callerId)).toEqual(['bob', 'bob']);

    // Now it is complete: a further retry is 409 like any decided change.
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
  });

  it('answers 200 once for 20 simultaneous approvals by one approver, each with its own envelope, while the first still applies', async () => {
    const change = await propose();
    let open!: () => void;
    applier.gate = new Promise((resolve) => (open = resolve));
    const all = Promise.allSettled(Array.from({ length: 20 }, () => mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))));
    await new Promise((resolve) => setTimeout(resolve, 10));
    open();
    const results = await all;
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) expect(r.reason).toEqual(refusal('conflict', undefined));
    expect(applier.calls).toBe(1);
    expect(audit.events.filter((e) => e.action === 'approve')).toHaveLength(1);
  });

  it('lets the approver complete after a crash of the applying request only once its lease has run out', async () => {
    const change = await propose();
    // The deciding request holds the claim and its process stops before applying.
    const event = await new GovernanceAudit(signer, clock, ids).sign({ callerId: 'bob', action: 'approve', subjectType: 'widget-change', subjectId: change.id, summary: 'set w to 1' });
    await store.decide({ id: change.id, kind: 'widget', decision: 'APPROVED', decider: 'bob', decidedAt: clock.now().toISOString(), nonce: nonce(), applyClaim: { token: 'crashed', until: new Date(clock.t + APPLY_LEASE_MS).toISOString() }, event });
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    clock.advance(APPLY_LEASE_MS);
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))).rejects.toEqual(refusal('conflict', undefined));
    clock.advance(1);
    await expect(mc.approve(change.id, bob, envelope(bob, change.id, 'approve'))).resolves.toMatchObject({ status: 'APPROVED', appliedAt: expect.any(String) });
    expect(applier.calls).toBe(1);
  });

  it('answers 409 to a request whose lease ran out while it applied and whose claim the approver took over', async () => {
    const change = await propose();
    let open!: () => void;
    applier.gate = new Promise((resolve) => (open = resolve));
    const slow = mc.approve(change.id, bob, envelope(bob, change.id, 'approve'));
    slow.catch(() => undefined); // asserted below
    await new Promise((resolve) => setTimeout(resolve, 10));
    clock.advance(APPLY_LEASE_MS + 1);
    const retry = mc.approve(change.id, bob, envelope(bob, change.id, 'approve'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    open();
    await expect(retry).resolves.toMatchObject({ status: 'APPROVED', appliedAt: expect.any(String) });
    await expect(slow).rejects.toEqual(refusal('conflict', undefined));
    expect(applier.applied.get('w')).toBe(1);
  });
});

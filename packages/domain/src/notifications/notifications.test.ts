import { describe, expect, it } from '@jest/globals';
import type { Caller } from '../identity/caller.js';
import type { EgressResult, OutboundJsonRequest } from '../egress/ports.js';
import { jsonBodyText } from '../egress/ports.js';
import { GovernanceAudit } from '../governance/governance-audit.js';
import { InMemoryPendingChangeStore } from '../governance/in-memory.js';
import { MakerChecker } from '../governance/maker-checker.js';
import { fakeSigner } from '../governance/testing.js';
import { NOTICE_RETRY_DELAYS_MS, NoticeDelivery, type ClaimedNotice, type NoticeOutbox } from './delivery.js';
import { consoleUrlOf, NO_NOTICES, WebhookNotices, type OutboundNotice } from './pending-items.js';

let counter = 0;
const ids = { uuid: () => `00000000-0000-4000-8000-${String(++counter).padStart(12, '0')}` };
const T0 = Date.parse('2026-11-21T12:00:00.000Z');
const clockAt = () => {
  const c = { t: T0, now: () => new Date(c.t) };
  return c;
};
const alice: Caller = { callerId: 'alice', credentialHolderType: 'USER', allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] };

describe('announcing new pending items', () => {
  const notifier = new WebhookNotices({ endpoints: ['https://a.example.com/hook', 'https://b.example.com/x?t=1'], publicBase: 'https://ets.example.com/', ids });

  it('makes one notice per endpoint, one message id for all, with the contract payload and console link', () => {
    const notices = notifier.noticesOf({ kind: 'policy', id: 'c-1', summary: "publish policy 'p'", createdAt: '2026-11-21T12:00:00.000Z' });
    expect(notices.map((n) => n.endpoint)).toEqual(['https://a.example.com/hook', 'https://b.example.com/x?t=1']);
    expect(new Set(notices.map((n) => n.messageId)).size).toBe(1);
    expect(notices[0]!.messageId).toMatch(/^msg_[0-9a-f-]{36}$/);
    expect(new Set(notices.map((n) => n.deliveryId)).size).toBe(2);
    expect(notices[0]!.body).toEqual({
      type: 'pending.created',
      item: { kind: 'policy', id: 'c-1', summary: "publish policy 'p'", consoleUrl: 'https://ets.example.com/console#/items/policy/c-1' },
      createdAt: '2026-11-21T12:00:00.000Z',
    });
    expect(consoleUrlOf('http://h:1', 'a b', 'x/y')).toBe('http://h:1/console#/items/a%20b/x%2Fy');
    expect(NO_NOTICES.noticesOf({ kind: 'policy', id: 'c', summary: 's', createdAt: 't' })).toEqual([]);
  });

  it('the maker-checker stores the notices with the proposal, and none when the proposal is refused', async () => {
    const store = new InMemoryPendingChangeStore();
    const clock = clockAt();
    const mc = new MakerChecker<{ n: number }>({
      kind: 'widget',
      store,
      applier: { apply: async () => undefined },
      stepUpVerifier: { verify: () => false, publicKeyOf: () => undefined },
      approvers: { stepUpKeysOf: () => [] },
      clock,
      ids,
      audit: new GovernanceAudit(fakeSigner, clock, ids),
      describe: (c) => `set widget to ${c.payload.n}`,
      notifier,
    });
    const change = await mc.propose(alice, { payload: { n: 1 }, subject: 'w' });
    expect(store.notices).toHaveLength(2);
    expect(store.notices[0]!.body).toMatchObject({ item: { kind: 'widget', id: change.id, summary: 'set widget to 1' }, createdAt: change.createdAt });
    await expect(mc.propose(alice, { payload: { n: 2 }, subject: 'w' })).rejects.toMatchObject({ kind: 'conflict' });
    expect(store.notices).toHaveLength(2);
  });
});

/** An outbox in memory with the port's rules: leases, removal on delivery, rescheduling on failure. */
class MemoryOutbox implements NoticeOutbox {
  rows = new Map<string, ClaimedNotice & { nextAttemptAt: string | null; leaseToken?: string; leaseUntil?: string; lastError?: string }>();
  add(n: OutboundNotice): void {
    this.rows.set(n.deliveryId, { ...n, attempts: 0, nextAttemptAt: n.createdAt });
  }
  async claimDue(r: { now: string; leaseUntil: string; token: string; limit: number }): Promise<ClaimedNotice[]> {
    const due = [...this.rows.values()].filter((x) => x.nextAttemptAt !== null && x.nextAttemptAt <= r.now && (!x.leaseUntil || x.leaseUntil < r.now)).slice(0, r.limit);
    for (const x of due) Object.assign(x, { leaseToken: r.token, leaseUntil: r.leaseUntil });
    return due.map(({ deliveryId, messageId, endpoint, body, createdAt, attempts }) => ({ deliveryId, messageId, endpoint, body, createdAt, attempts }));
  }
  async delivered(id: string, token: string): Promise<void> {
    if (this.rows.get(id)?.leaseToken === token) this.rows.delete(id);
  }
  async failed(id: string, token: string, o: { attempts: number; nextAttemptAt: string | null; error: string }): Promise<void> {
    const x = this.rows.get(id);
    if (x?.leaseToken !== token) return;
    Object.assign(x, { attempts: o.attempts, nextAttemptAt: o.nextAttemptAt, lastError: o.error, leaseToken: undefined, leaseUntil: undefined });
  }
}

describe('delivering notices', () => {
  const setup = (answers: EgressResult[]) => {
    const clock = clockAt();
    const outbox = new MemoryOutbox();
    const sent: OutboundJsonRequest[] = [];
    const egress = { postJson: async (r: OutboundJsonRequest) => (sent.push(r), answers.shift() ?? { outcome: 'answered' as const, status: 204, body: undefined }) };
    const signer = { sign: (id: string, ts: number, body: string) => `v1,${id}|${ts}|${body}` };
    const delivery = new NoticeDelivery({ outbox, egress, signer, clock, ids });
    const [notice] = new WebhookNotices({ endpoints: ['https://hooks.example.com/secret-path'], publicBase: 'https://ets.example.com', ids }).noticesOf({
      kind: 'policy',
      id: 'c-1',
      summary: 's',
      createdAt: clock.now().toISOString(),
    });
    outbox.add(notice!);
    return { clock, outbox, sent, delivery, notice: notice! };
  };

  it('signs each attempt when it is sent, with the Standard Webhooks headers over the exact body text', async () => {
    const { clock, sent, delivery, notice, outbox } = setup([]);
    clock.t += 1500;
    expect(await delivery.deliverDue()).toEqual([{ deliveryId: notice.deliveryId, messageId: notice.messageId, host: 'hooks.example.com', outcome: 'delivered', attempts: 1 }]);
    const ts = Math.floor((T0 + 1500) / 1000);
    expect(sent[0]).toEqual({
      endpoint: notice.endpoint,
      body: notice.body,
      headers: { 'webhook-id': notice.messageId, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${notice.messageId}|${ts}|${jsonBodyText(notice.body)}` },
      timeoutMs: 10_000,
    });
    expect(outbox.rows.size).toBe(0);
  });

  it('retries what was not delivered (another status, not sent, unknown) after the backoff, with the same id, and gives up after the last delay', async () => {
    const failures: EgressResult[] = [
      { outcome: 'answered', status: 500, body: undefined },
      { outcome: 'not-sent', reason: 'connect', message: 'refused' },
      { outcome: 'unknown', reason: 'timeout', message: 'no answer' },
      ...Array.from({ length: NOTICE_RETRY_DELAYS_MS.length - 2 }, () => ({ outcome: 'answered' as const, status: 302, body: undefined })),
    ];
    expect(failures).toHaveLength(NOTICE_RETRY_DELAYS_MS.length + 1);
    const { clock, sent, delivery, outbox, notice } = setup(failures);
    for (const [i, delay] of NOTICE_RETRY_DELAYS_MS.entries()) {
      const [r] = await delivery.deliverDue();
      expect(r).toMatchObject({ outcome: 'retry', attempts: i + 1, nextAttemptAt: new Date(clock.t + delay).toISOString() });
      clock.t += delay - 1;
      expect(await delivery.deliverDue()).toEqual([]); // not due yet
      clock.t += 1;
    }
    const [last] = await delivery.deliverDue();
    expect(last).toMatchObject({ outcome: 'gave-up', attempts: NOTICE_RETRY_DELAYS_MS.length + 1, nextAttemptAt: null, error: 'answered 302' });
    clock.t += 365 * 86_400_000;
    expect(await delivery.deliverDue()).toEqual([]);
    expect(outbox.rows.get(notice.deliveryId)).toMatchObject({ nextAttemptAt: null, lastError: 'answered 302' });
    expect(new Set(sent.map((s) => s.headers!['webhook-id']))).toEqual(new Set([notice.messageId]));
  });
});

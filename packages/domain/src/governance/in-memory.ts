import type { Page } from '../ports/page.js';
import type { ChangeStatus, PendingChange } from './change.js';
import type { GovernanceEvent } from '../ports/audit.js';
import type { Signed } from '../ports/crypto.js';
import type { OutboundNotice } from '../notifications/pending-items.js';
import type { ApplyClaim, ApplyClaimRequest, DecisionRequest, DecisionResult, PendingChangeStore } from './ports.js';

const copy = <T>(x: T): T => structuredClone(x);

/**
 * PendingChangeStore in memory: the reference behaviour of the port (the storage contract suite
 * holds the TypeORM adapter to the same rules), for unit tests of every kind of change. Every
 * method does its work synchronously before its first await, so each call is atomic.
 */
export class InMemoryPendingChangeStore implements PendingChangeStore {
  readonly changes = new Map<string, PendingChange>();
  readonly nonces = new Set<string>();
  /** Apply claims by change id (not part of the change a caller sees). */
  readonly claims = new Map<string, ApplyClaim>();
  /** The governance events stored with the changes, in order. */
  readonly events: Signed<GovernanceEvent>[] = [];
  /** The notices stored with the changes (the outbox), in order. */
  readonly notices: OutboundNotice[] = [];

  async create(change: PendingChange, event: Signed<GovernanceEvent>, notices: readonly OutboundNotice[] = []): Promise<boolean> {
    if (this.changes.has(change.id)) return false;
    if (change.subject !== undefined) {
      for (const c of this.changes.values()) {
        if (c.kind === change.kind && c.subject === change.subject && c.status === 'PENDING_APPROVAL') return false;
      }
    }
    this.changes.set(change.id, copy(change));
    this.events.push(copy(event));
    this.notices.push(...copy(notices));
    return true;
  }

  async get(id: string): Promise<PendingChange | undefined> {
    const c = this.changes.get(id);
    return c && copy(c);
  }

  async list(query: { kind: string; status?: ChangeStatus; subject?: string }): Promise<PendingChange[]> {
    return [...this.changes.values()]
      .filter((c) => c.kind === query.kind && (query.status === undefined || c.status === query.status) && (query.subject === undefined || c.subject === query.subject))
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1))
      .map(copy);
  }

  async page(query: { kind: string; status?: ChangeStatus }, page: number, pageSize: number): Promise<Page<PendingChange>> {
    const all = await this.list(query);
    return { items: all.slice((page - 1) * pageSize, page * pageSize), page, pageSize, total: all.length };
  }

  async decide(r: DecisionRequest): Promise<DecisionResult> {
    if (this.nonces.has(r.nonce)) return { nonceFresh: false, decided: false };
    this.nonces.add(r.nonce);
    const c = this.changes.get(r.id);
    if (!c || c.kind !== r.kind) return { nonceFresh: true, decided: false };
    const decided = c.status === 'PENDING_APPROVAL';
    if (decided) {
      c.status = r.decision;
      c.decider = r.decider;
      c.decidedAt = r.decidedAt;
      if (r.rejectionReason !== undefined) c.rejectionReason = r.rejectionReason;
      if (r.applyClaim) this.claims.set(c.id, { ...r.applyClaim });
      this.events.push(copy(r.event));
    }
    return { nonceFresh: true, decided, change: copy(c) };
  }

  async claimApply(r: ApplyClaimRequest): Promise<boolean> {
    const c = this.changes.get(r.id);
    if (!c || c.kind !== r.kind || c.status !== 'APPROVED' || c.decider !== r.decider || c.appliedAt !== undefined) return false;
    const held = this.claims.get(r.id);
    if (held && held.until >= r.now) return false;
    this.claims.set(r.id, { ...r.claim });
    this.events.push(copy(r.event));
    return true;
  }

  async releaseApply(id: string, token: string): Promise<void> {
    if (this.claims.get(id)?.token === token) this.claims.delete(id);
  }

  async markApplied(id: string, at: string, token: string): Promise<boolean> {
    const c = this.changes.get(id);
    if (!c || c.appliedAt !== undefined || this.claims.get(id)?.token !== token) return false;
    c.appliedAt = at;
    this.claims.delete(id);
    return true;
  }
}

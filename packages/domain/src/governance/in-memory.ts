import type { ChangeStatus, PendingChange } from './change.js';
import type { DecisionRequest, DecisionResult, PendingChangeStore } from './ports.js';

const copy = <T>(x: T): T => structuredClone(x);

/**
 * PendingChangeStore in memory: the reference behaviour of the port (the storage contract suite
 * holds the TypeORM adapter to the same rules), for unit tests of every kind of change. Every
 * method does its work synchronously before its first await, so each call is atomic.
 */
export class InMemoryPendingChangeStore implements PendingChangeStore {
  readonly changes = new Map<string, PendingChange>();
  readonly nonces = new Set<string>();

  async create(change: PendingChange): Promise<boolean> {
    if (this.changes.has(change.id)) return false;
    if (change.subject !== undefined) {
      for (const c of this.changes.values()) {
        if (c.kind === change.kind && c.subject === change.subject && c.status === 'PENDING_APPROVAL') return false;
      }
    }
    this.changes.set(change.id, copy(change));
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
    }
    return { nonceFresh: true, decided, change: copy(c) };
  }

  async markApplied(id: string, at: string): Promise<void> {
    const c = this.changes.get(id);
    if (c && c.appliedAt === undefined) c.appliedAt = at;
  }
}

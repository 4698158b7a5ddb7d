import { DomainError, invalid } from '../shared/errors.js';
import { isVerifiedHuman, type Caller } from '../identity/caller.js';
import type { Clock } from '../ports/clock.js';
import type { AttestationStore, DecisionQuery } from './ports.js';
import type { AuditStats, DecisionDetail, DecisionRow, SecurityEvent } from './records.js';
import { attestationTime } from './requests.js';

/** Defaults and bounds of the paging of `/audit/decisions` and `/audit/security`. */
export const AUDIT_DEFAULT_LIMIT = 50;
export const AUDIT_MAX_LIMIT = 500;
export const AUDIT_MAX_OFFSET = 1_000_000;

export const DECISION_NOT_FOUND = 'Decision not found.';

type Query = Record<string, unknown>;

function wholeNumber(q: Query, name: string, fallback: number, min: number, max: number): number {
  const v = q[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !/^\d{1,9}$/.test(v) || Number(v) < min || Number(v) > max) {
    throw invalid(`${name} must be a whole number from ${min} to ${max}.`);
  }
  return Number(v);
}

function time(q: Query, name: string): string | undefined {
  const v = q[name];
  if (v === undefined) return undefined;
  const at = attestationTime(v);
  if (at === undefined) throw invalid(`${name} must be an ISO 8601 date-time (e.g. 2026-01-01T00:00:00Z).`);
  return new Date(at).toISOString();
}

function timeRange(q: Query): { from?: string; to?: string } {
  const from = time(q, 'from');
  const to = time(q, 'to');
  if (from !== undefined && to !== undefined && from > to) throw invalid('from must not be later than to.');
  return { ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) };
}

/**
 * The audit reads of profile A (spec 4.2, 6). A USER key reads everything (the composition root
 * may widen that, e.g. to the single caller of the simple variant); any other key reads only what
 * its own caller did. Queries: `limit` 1 to 500 (default 50), `offset` 0 to 1000000 (default 0),
 * `from` and `to` inclusive ISO 8601 bounds; anything else is 400.
 */
export class AttestationAudit {
  constructor(
    private readonly d: {
      store: Pick<AttestationStore, 'listDecisions' | 'getDecision' | 'counts' | 'listSecurityEvents'>;
      clock: Clock;
      readsAll?: (caller: Caller) => boolean;
    },
  ) {}

  async decisions(caller: Caller, q: Query): Promise<DecisionRow[]> {
    const query: DecisionQuery = {
      limit: wholeNumber(q, 'limit', AUDIT_DEFAULT_LIMIT, 1, AUDIT_MAX_LIMIT),
      offset: wholeNumber(q, 'offset', 0, 0, AUDIT_MAX_OFFSET),
      ...timeRange(q),
      ...this.scope(caller),
    };
    if (q.policyId !== undefined) {
      if (typeof q.policyId !== 'string' || q.policyId === '' || q.policyId.length > 128) throw invalid('policyId must be a policy name.');
      query.policyId = q.policyId;
    }
    if (q.decision !== undefined) {
      if (q.decision !== 'approve' && q.decision !== 'reject') throw invalid('decision must be approve or reject.');
      query.action = q.decision;
    }
    return this.d.store.listDecisions(query);
  }

  async decision(caller: Caller, executionId: string): Promise<DecisionDetail> {
    const found = await this.d.store.getDecision(executionId);
    const scope = this.scope(caller);
    if (!found || (scope.callerId !== undefined && found.callerId !== scope.callerId)) throw new DomainError('not_found', DECISION_NOT_FOUND);
    return found;
  }

  async stats(caller: Caller): Promise<AuditStats> {
    const now = this.d.clock.now();
    const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())).toISOString();
    const c = await this.d.store.counts({ since, ...this.scope(caller) });
    return {
      total_decisions: String(c.totalDecisions),
      decisions_today: String(c.decisionsSince),
      total_verifications: String(c.totalVerifications),
      valid_verifications: String(c.validVerifications),
      invalid_verifications: String(c.totalVerifications - c.validVerifications),
      total_security_events: String(c.totalSecurityEvents),
      total_api_calls: String(c.totalApiCalls),
    };
  }

  async security(caller: Caller, q: Query): Promise<SecurityEvent[]> {
    return this.d.store.listSecurityEvents({ limit: wholeNumber(q, 'limit', AUDIT_DEFAULT_LIMIT, 1, AUDIT_MAX_LIMIT), ...timeRange(q), ...this.scope(caller) });
  }

  private scope(caller: Caller): { callerId?: string } {
    return (this.d.readsAll ?? isVerifiedHuman)(caller) ? {} : { callerId: caller.callerId };
  }
}

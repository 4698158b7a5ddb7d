import { CLAIM_OUTCOMES, DomainError, parseRfc3339, type ClaimQuery } from '@ets/domain';

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A value of one query parameter given at most once, else 400. */
function one(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v === '') throw new DomainError('invalid', `${name} must be given once, not empty.`);
  return v;
}

/**
 * A bound of `from` / `to`: an RFC 3339 date-time, or a date (`2026-03-01`: from its first
 * millisecond for `from`, to its last for `to`, UTC). Normalised to `toISOString`, the form the
 * stores keep times in, so that bounds compare with them as text.
 */
function bound(query: Record<string, unknown>, name: 'from' | 'to'): string | undefined {
  const v = one(query, name);
  if (v === undefined) return undefined;
  const day = DATE.exec(v);
  const ms = day ? parseRfc3339(`${v}T${name === 'from' ? '00:00:00.000' : '23:59:59.999'}Z`) : parseRfc3339(v);
  if (ms === undefined) throw new DomainError('invalid', `${name} must be an RFC 3339 date-time (2026-03-01T12:00:00Z) or a date (2026-03-01).`);
  return new Date(ms).toISOString();
}

/** The query parameters of the filters of `GET /transactions`. */
export const CLAIM_QUERY = ['callerId', 'outcome', 'from', 'to'] as const;

/** The filters of `GET /transactions` (callerId, outcome, from, to); each invalid one is 400 naming it. */
export function readClaimQuery(query: Record<string, unknown>): ClaimQuery {
  const callerId = one(query, 'callerId');
  if (callerId !== undefined && (callerId.length > 256 || /[\x00-\x1f\x7f]/.test(callerId))) throw new DomainError('invalid', 'callerId must be a caller id of at most 256 characters.');
  const outcome = one(query, 'outcome');
  if (outcome !== undefined && !(CLAIM_OUTCOMES as readonly string[]).includes(outcome)) {
    throw new DomainError('invalid', `outcome must be one of ${CLAIM_OUTCOMES.join(', ')}.`);
  }
  const from = bound(query, 'from');
  const to = bound(query, 'to');
  if (from !== undefined && to !== undefined && from > to) throw new DomainError('invalid', 'from must not be later than to.');
  return {
    ...(callerId !== undefined ? { callerId } : {}),
    ...(outcome !== undefined ? { outcome: outcome as ClaimQuery['outcome'] } : {}),
    ...(from !== undefined ? { from } : {}),
    ...(to !== undefined ? { to } : {}),
  };
}

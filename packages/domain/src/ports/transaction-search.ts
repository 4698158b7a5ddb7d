import type { Page, ReadScope, TransactionClaim } from '../execution/ports.js';

/** The outcomes a transaction can have, as `GET /transactions?outcome=` takes them. */
export const CLAIM_OUTCOMES = ['REFUSED', 'RECORDED', 'HELD', 'EXECUTING', 'EXECUTED'] as const satisfies readonly TransactionClaim['outcome'][];

/** What `GET /transactions` filters by (all given conditions hold); times are ISO 8601 UTC, both bounds included. */
export interface ClaimQuery {
  callerId?: string;
  outcome?: TransactionClaim['outcome'];
  from?: string;
  to?: string;
}

/** Finding transactions for a person (the console's records page): newest first, within the reader's scope. */
export interface TransactionSearch {
  findClaims(query: ClaimQuery, scope: ReadScope, page: number, pageSize: number): Promise<Page<TransactionClaim>>;
}

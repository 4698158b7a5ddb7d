/**
 * Ids that may be accepted once only: signed approvals (spec 4.3.4) and the nonces of source
 * answers (spec 2.3). The store inserts the id atomically, so of concurrent uses, in one process or
 * several sharing a database, exactly one is the first.
 */
export interface SingleUseLedger {
  /** Records `id` as used in `scope`; true when this call was the first use, false when it had been used. */
  consume(scope: string, id: string, at: string): Promise<boolean>;
}

/** Fresh unpredictable nonces: at least 16 random bytes, base64url without padding. */
export interface NonceGenerator {
  nonce(): string;
}

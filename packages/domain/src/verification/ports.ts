import type { ReadScope } from '../execution/ports.js';
import type { SignedReceipt, SignedVerification } from './records.js';

/**
 * Storage of Verifications. Appended, never changed: every `POST /verify` adds one, and the
 * latest one (newest `verifiedAt`, ties in insertion order) is what `GET /verification/{id}`
 * serves and what `POST /receipt` requires to be VERIFIED.
 */
export interface VerificationStore {
  append(verification: SignedVerification): Promise<void>;
  /** Within `scope`: the Verifications of a transaction claimed by another caller are not found. */
  latest(businessTransactionId: string, scope: ReadScope): Promise<SignedVerification | undefined>;
}

/** Storage of Receipts: appended, never changed; the latest by `issuedAt`, ties in insertion order. */
export interface ReceiptStore {
  append(receipt: SignedReceipt): Promise<void>;
  /** Within `scope`, as for Verifications. */
  latest(businessTransactionId: string, scope: ReadScope): Promise<SignedReceipt | undefined>;
}

import type { Signed } from '../ports/crypto.js';

/** The outcome of one check of a verification. */
export interface CheckResult {
  status: 'PASSED' | 'FAILED' | 'NOT_APPLICABLE';
  /** Which part failed, in words an auditor can act on; empty when PASSED. */
  errors: string[];
}

/**
 * A Verification (spec 2.3): the service's signed statement of what it checked on an Execution
 * Trust Record and what it found. `VERIFIED` only when every applicable check passed.
 */
export interface Verification {
  recordType: 'verification';
  verificationId: string;
  businessTransactionId: string;
  status: 'VERIFIED' | 'FAILED';
  checks: {
    /** The record's signature(s) against the published keys (both in hybrid mode). */
    signature: CheckResult;
    /** Spec 4.3.13: every execution carries all or none of the chain fields, none after a chained one; hashes and chain signatures recompute. */
    executionChain: CheckResult;
    /** `transaction.policy.contentHash` equals the hash of the stored policy content. */
    policyContentHash: CheckResult;
    /** The Execution Intent binds the same parameters (its businessTransactionHash) and verifies. */
    intentBinding: CheckResult;
  };
  /** SHA-256 of the canonical signed record that was verified. */
  trustRecordHash: string;
  verifiedAt: string;
}

/** A Receipt (spec 2.3): signed, issued only for a record whose latest Verification is VERIFIED. */
export interface Receipt {
  recordType: 'receipt';
  receiptId: string;
  businessTransactionId: string;
  verificationId: string;
  trustRecordHash: string;
  decision: { action: string; reason: string; requires_override: boolean };
  executionStatus: string;
  issuedAt: string;
}

export type SignedVerification = Signed<Verification>;
export type SignedReceipt = Signed<Receipt>;

import type { Signed } from '../ports/crypto.js';
import type { PolicyDecision } from '../policy/index.js';
import type { TransparencyProof } from '../transparency/records.js';

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
  /**
   * The inclusion of the Trust Record (leaf = `trustRecordHash`) in the transparency log, proved
   * against a signed checkpoint. Signed with the Receipt; absent on Receipts issued without the log.
   */
  transparency?: TransparencyProof;
}

/**
 * The answer of `POST /replay`: the recorded decision re-evaluated with the recorded policy
 * content and the recorded signals, and the record's signature(s) checked again. Computed on
 * request; neither stored nor signed (it is a diagnosis, not evidence: a Verification is).
 */
export interface ReplayResult {
  businessTransactionId: string;
  /** True when the stored policy content still hashes to the recorded contentHash and decides exactly the recorded decision. */
  decisionMatches: boolean;
  recordedDecision: PolicyDecision;
  /** What the stored policy content decides for the recorded signals and intent; null when it cannot be evaluated (missing or invalid policy). */
  replayedDecision: PolicyDecision | null;
  /** The record's signature(s) against the published keys (both in hybrid mode). */
  signatureValid: boolean;
  /** The SHA-256 of the stored policy content equals `transaction.policy.contentHash` of the record. */
  policyContentHashMatches: boolean;
  replayedAt: string;
  /** Why something did not match; empty when everything matched. */
  errors: string[];
}

export type SignedVerification = Signed<Verification>;
export type SignedReceipt = Signed<Receipt>;

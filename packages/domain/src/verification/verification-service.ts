import { DomainError } from '../shared/errors.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Hasher, SignatureVerifier, Signer } from '../ports/crypto.js';
import { compilePolicy, evaluatePolicy, type PolicyDecision, type PolicyStore, type PolicyVersion } from '../policy/index.js';
import { transactionHash } from '../execution/chain.js';
import type { ExecutionStore, ReadScope } from '../execution/ports.js';
import type { ExecutionIntent, SignedIntent, SignedTrustRecord } from '../execution/records.js';
import { checkExecutionChain, failed, notApplicable, resultOf } from './execution-chain.js';
import type { ReceiptStore, VerificationStore } from './ports.js';
import type { CheckResult, Receipt, ReplayResult, SignedReceipt, SignedVerification, Verification } from './records.js';
import { isPlainObject } from '../shared/guards.js';
import { signed } from '../shared/fail-closed.js';
import { sameValue } from '../shared/same-value.js';
import type { LogLeaf, TransparencyProof } from '../transparency/records.js';

export const TRUST_RECORD_NOT_FOUND = 'Execution Trust Record not found.';
export const VERIFICATION_NOT_FOUND = 'Verification not found.';
export const RECEIPT_NOT_FOUND = 'Receipt not found.';
export const NOT_VERIFIED = 'The record must be verified first: its latest Verification is not VERIFIED.';
export const NEVER_VERIFIED = 'The record must be verified first: it has no Verification.';
export const RECORD_CHANGED = 'The record must be verified first: it changed since its latest Verification.';
export const VERIFICATION_INVALID = 'The record must be verified first: its latest Verification does not verify.';
export const RECEIPT_PROOF_UNAVAILABLE = "No checkpoint of the transparency log could be signed to prove the record's inclusion; nothing was stored.";

export interface VerificationDeps {
  records: Pick<ExecutionStore, 'getTrustRecord' | 'hasTrustRecord' | 'getIntent'>;
  /** The policy store itself, not a cache: the check recomputes the hash of what is stored now. */
  policies: Pick<PolicyStore, 'find'>;
  verifications: VerificationStore;
  receipts: ReceiptStore;
  signer: Signer;
  verifier: SignatureVerifier;
  hasher: Hasher;
  clock: Clock;
  ids: IdGenerator;
  /**
   * The transparency log's proofs (a `CheckpointPublisher`): a Receipt carries its Trust Record's
   * inclusion proof against a signed checkpoint. Without it Receipts carry none.
   */
  transparency?: { proofOf(leaf: LogLeaf): Promise<TransparencyProof | undefined> };
}


/** The policy a record names, when it names one. */
function policyRefOf(record: SignedTrustRecord): { name: string; version: string } | undefined {
  const p: unknown = isPlainObject(record.transaction) ? record.transaction.policy : undefined;
  return isPlainObject(p) && typeof p.name === 'string' && typeof p.version === 'string' ? { name: p.name, version: p.version } : undefined;
}

const hasExecutions = (record: SignedTrustRecord): boolean => Array.isArray(record.executions) && record.executions.length > 0;

/** A check that meets data it cannot read fails; it never turns a verification into a 500. */
function guard(what: string, check: () => CheckResult): CheckResult {
  try {
    return check();
  } catch {
    return failed([`${what}: cannot be checked (malformed record)`]);
  }
}

/**
 * Verifications, Receipts and replay of Execution Trust Records (spec 2.3, 4.1, 4.3.13, 9.5).
 *
 * `verify` checks a stored record and stores a signed Verification of what it found: `VERIFIED`
 * only when every applicable check PASSED. A FAILED verification is a result, not an error.
 * `issueReceipt` signs a Receipt only for a record whose latest Verification is VERIFIED and which
 * has not changed since. `replay` re-decides the recorded request; it is neither stored nor signed.
 */
export class VerificationService {
  constructor(private readonly d: VerificationDeps) {}

  async verify(businessTransactionId: string, scope: ReadScope): Promise<SignedVerification> {
    const record = await this.recordOrFail(businessTransactionId, scope);
    const ref = policyRefOf(record);
    const [intent, policy] = await Promise.all([
      hasExecutions(record) ? this.d.records.getIntent(businessTransactionId, scope) : undefined,
      ref ? this.d.policies.find(ref) : undefined,
    ]);
    const checks: Verification['checks'] = {
      signature: guard('signature', () => this.signatureCheck(record)),
      executionChain: guard('executions', () => checkExecutionChain(record, this.d.hasher, this.d.verifier)),
      policyContentHash: guard('transaction.policy', () => this.policyCheck(record, ref, policy)),
      intentBinding: guard('intent', () => this.intentCheck(record, intent?.intent)),
    };
    const verification: Verification = {
      recordType: 'verification',
      verificationId: this.d.ids.uuid(),
      businessTransactionId,
      status: Object.values(checks).every((c) => c.status !== 'FAILED') ? 'VERIFIED' : 'FAILED',
      checks,
      trustRecordHash: this.recordHash(record),
      verifiedAt: this.d.clock.now().toISOString(),
    };
    const signed = await this.sign(verification);
    await this.d.verifications.append(signed);
    return signed;
  }

  /** `GET /verification/{id}`: 404 without a code when the record or its Verification is missing. */
  async latestVerification(businessTransactionId: string, scope: ReadScope): Promise<SignedVerification> {
    const latest = await this.d.verifications.latest(businessTransactionId, scope);
    if (latest) return latest;
    throw new DomainError('not_found', (await this.d.records.hasTrustRecord(businessTransactionId, scope)) ? VERIFICATION_NOT_FOUND : TRUST_RECORD_NOT_FOUND);
  }

  async issueReceipt(businessTransactionId: string, scope: ReadScope): Promise<SignedReceipt> {
    const record = await this.recordOrFail(businessTransactionId, scope);
    const latest = await this.d.verifications.latest(businessTransactionId, scope);
    const refuse = (message: string) => new DomainError('conflict', message, 'RECEIPT_GENERATION_FAILED');
    if (!latest) throw refuse(NEVER_VERIFIED);
    if (latest.status !== 'VERIFIED') throw refuse(NOT_VERIFIED);
    // Our own storage is evidence too: a Verification edited in place does not count.
    if (!this.d.verifier.verify(latest).valid) throw refuse(VERIFICATION_INVALID);
    const trustRecordHash = this.recordHash(record);
    if (trustRecordHash !== latest.trustRecordHash) throw refuse(RECORD_CHANGED);

    const decision: Partial<PolicyDecision> = isPlainObject(record.decision) ? record.decision : {};
    const transparency = await this.inclusionOf(trustRecordHash);
    const receipt: Receipt = {
      recordType: 'receipt',
      receiptId: this.d.ids.uuid(),
      businessTransactionId,
      verificationId: latest.verificationId,
      trustRecordHash,
      decision: { action: String(decision.action), reason: String(decision.reason), requires_override: decision.requires_override === true },
      executionStatus: record.assessment?.execution?.status ?? (hasExecutions(record) ? 'EXECUTED' : 'NOT_RELEASED'),
      issuedAt: this.d.clock.now().toISOString(),
      ...(transparency ? { transparency } : {}),
    };
    const signed = await this.sign(receipt);
    await this.d.receipts.append(signed);
    return signed;
  }

  /** `GET /receipt/latest/{id}`: 404 without a code when the record or its Receipt is missing. */
  async latestReceipt(businessTransactionId: string, scope: ReadScope): Promise<SignedReceipt> {
    const latest = await this.d.receipts.latest(businessTransactionId, scope);
    if (latest) return latest;
    throw new DomainError('not_found', (await this.d.records.hasTrustRecord(businessTransactionId, scope)) ? RECEIPT_NOT_FOUND : TRUST_RECORD_NOT_FOUND);
  }

  /**
   * Re-evaluates the recorded decision: the policy version the record names, as stored now (its
   * content must still hash to the recorded contentHash), on the recorded signals and intent; and
   * checks the record's signature(s) again. Not stored, not signed.
   */
  async replay(businessTransactionId: string, scope: ReadScope): Promise<ReplayResult> {
    const record = await this.recordOrFail(businessTransactionId, scope);
    const errors: string[] = [];
    const ref = policyRefOf(record);
    const policy = ref ? await this.d.policies.find(ref) : undefined;

    const signature = guard('signature', () => this.signatureCheck(record));
    errors.push(...signature.errors);

    const contentHash = guard('transaction.policy', () => this.policyCheck(record, ref, policy));
    errors.push(...contentHash.errors);

    let replayedDecision: PolicyDecision | null = null;
    if (policy) {
      try {
        const tx = record.transaction;
        replayedDecision = evaluatePolicy(compilePolicy(policy.content), {
          signals: isPlainObject(tx.signals) ? tx.signals : {},
          intent: { action: tx.intent.action, parameters: isPlainObject(tx.intent.parameters) ? tx.intent.parameters : {} },
        });
      } catch {
        errors.push('policy: the stored policy content cannot be evaluated');
      }
    }
    const recordedDecision = record.decision;
    const sameDecision = replayedDecision !== null && this.sameDecision(recordedDecision, replayedDecision);
    if (replayedDecision !== null && !sameDecision) errors.push('decision: the replayed decision differs from the recorded one');
    return {
      businessTransactionId,
      decisionMatches: contentHash.status === 'PASSED' && sameDecision,
      recordedDecision,
      replayedDecision,
      signatureValid: signature.status === 'PASSED',
      policyContentHashMatches: contentHash.status === 'PASSED',
      replayedAt: this.d.clock.now().toISOString(),
      errors,
    };
  }

  // --- checks -------------------------------------------------------------------------------------

  private signatureCheck(record: unknown): CheckResult {
    const r = this.d.verifier.verify(record);
    return r.valid ? resultOf([]) : failed(r.errors.length > 0 ? r.errors : ['signature: does not verify']);
  }

  /** `transaction.policy.contentHash` equals the SHA-256 of the stored content, recomputed here. */
  private policyCheck(record: SignedTrustRecord, ref: { name: string; version: string } | undefined, policy: PolicyVersion | undefined): CheckResult {
    if (!ref) return failed(['transaction.policy: does not name a policy name and version']);
    const recorded: unknown = (record.transaction.policy as Record<string, unknown>).contentHash;
    if (typeof recorded !== 'string') return failed(['transaction.policy.contentHash: missing']);
    if (!policy) return failed([`transaction.policy: policy '${ref.name}' version '${ref.version}' is not stored`]);
    if (this.d.hasher.contentHash(policy.content) !== recorded) {
      return failed([`transaction.policy.contentHash: does not match the stored content of policy '${ref.name}' version '${ref.version}'`]);
    }
    return resultOf([]);
  }

  /**
   * When the record has executions, the intent stored before release must exist, verify, and bind
   * exactly the recorded transaction (businessTransactionHash recomputed from the record).
   */
  private intentCheck(record: SignedTrustRecord, intent: SignedIntent | undefined): CheckResult {
    if (!hasExecutions(record)) return notApplicable();
    if (!intent) return failed(['intent: no Execution Intent is stored for this businessTransactionId']);
    const errors: string[] = [];
    const sig = this.d.verifier.verify(intent);
    if (!sig.valid) errors.push(...(sig.errors.length > 0 ? sig.errors : ['signature: does not verify']).map((e) => `intent.${e}`));
    const i = intent as Partial<ExecutionIntent>;
    if (i.recordType !== 'execution-intent') errors.push('intent.recordType: not execution-intent');
    if (i.businessTransactionId !== record.businessTransactionId) errors.push('intent.businessTransactionId: names another transaction');
    const expected = transactionHash(this.d.hasher, record.transaction);
    if (i.businessTransactionHash !== expected) errors.push('intent.businessTransactionHash: does not match the hash of the recorded transaction');
    if (record.businessTransactionHash !== expected) errors.push('businessTransactionHash: does not match the recorded transaction');
    const p: Record<string, unknown> = isPlainObject(i.policy) ? i.policy : {};
    const rp = record.transaction.policy;
    if (p.name !== rp.name || p.version !== rp.version || p.contentHash !== rp.contentHash) {
      errors.push('intent.policy: does not name the recorded policy version and content hash');
    }
    return resultOf(errors);
  }

  // --- plumbing -----------------------------------------------------------------------------------

  /** Another caller's record is not found, like a missing one (CONTRACT "Requests, reads and lists"). */
  private async recordOrFail(businessTransactionId: string, scope: ReadScope): Promise<SignedTrustRecord> {
    const record = await this.d.records.getTrustRecord(businessTransactionId, scope);
    if (!record) throw new DomainError('not_found', TRUST_RECORD_NOT_FOUND, 'VERIFICATION_FAILED');
    return record;
  }

  /** SHA-256 of the canonical signed record as stored. */
  private recordHash(record: SignedTrustRecord): string {
    try {
      return this.d.hasher.contentHash(record);
    } catch {
      // Not canonicalizable (e.g. a number out of range written into the stored text): still a
      // stable fingerprint of what was read; its signature check has failed anyway.
      return this.d.hasher.sha256Hex(JSON.stringify(record));
    }
  }

  private sameDecision(a: unknown, b: PolicyDecision): boolean {
    if (!isPlainObject(a)) return false;
    const pick = (d: Record<string, unknown>) => ({ action: d.action, reason: d.reason, requires_override: d.requires_override, matchedRuleId: d.matchedRuleId ?? null });
    try {
      return sameValue(this.d.hasher, pick(a), pick(b as unknown as Record<string, unknown>));
    } catch {
      return false;
    }
  }

  /** The record's proof in the log (undefined when the log is not wired, or does not hold it). */
  private async inclusionOf(trustRecordHash: string): Promise<TransparencyProof | undefined> {
    if (!this.d.transparency) return undefined;
    try {
      return await this.d.transparency.proofOf(trustRecordHash);
    } catch (e) {
      throw new DomainError('unavailable', RECEIPT_PROOF_UNAVAILABLE, 'SIGNING_UNAVAILABLE', undefined, { cause: e });
    }
  }

  private sign<T extends object>(record: T) {
    return signed(() => this.d.signer.sign(record));
  }
}

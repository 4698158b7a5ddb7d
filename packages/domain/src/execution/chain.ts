import type { Hasher, Signer } from '../ports/crypto.js';
import type { ChainHead, ExecutionEntry, ExecutionTrustRecord, ReleaseContext, SignedTrustRecord } from './records.js';

type UnchainedEntry = Omit<ExecutionEntry, 'previousChainHash' | 'chainHash' | 'chainSignature'>;

/** The canonical digest of an execution that the chain links: the entry without chain fields, with its transaction id. */
export function executionDigest(hasher: Hasher, businessTransactionId: string, entry: UnchainedEntry): string {
  return hasher.contentHash({ businessTransactionId, execution: entry });
}

/** CONTRACT "Execution chain": SHA-256 over the previous hash and the execution's canonical digest. */
export function chainHashOf(hasher: Hasher, previousChainHash: string | null, digest: string): string {
  return hasher.sha256Hex(`${previousChainHash ?? ''}:${digest}`);
}

/**
 * Links the released execution into the deployment's chain and signs the Execution Trust Record.
 * Used on the request path and, for an intent left RELEASED by a crash, at restart. Callers that
 * already hold the transaction's hash (the signed intent carries it) pass it in, so the request is
 * not canonicalised and hashed a second time while the chain lock is held.
 */
export async function buildTrustRecord(
  deps: { hasher: Hasher; signer: Signer },
  ctx: ReleaseContext,
  head: ChainHead,
  callerId: string,
  recordedAt: string,
  businessTransactionHash: string = transactionHash(deps.hasher, ctx.transaction),
): Promise<SignedTrustRecord> {
  const { hasher, signer } = deps;
  const id = ctx.transaction.businessTransactionId;
  const digest = executionDigest(hasher, id, ctx.execution);
  const chainHash = chainHashOf(hasher, head.chainHash, digest);
  const chainSig = await signer.signText(chainHash, 'ed25519');
  const record: ExecutionTrustRecord = {
    recordType: 'execution-trust-record',
    businessTransactionId: id,
    businessTransactionHash,
    callerId,
    transaction: { ...ctx.transaction, policy: { ...ctx.transaction.policy, contentHash: ctx.policy.contentHash } },
    decision: ctx.decision,
    assessment: ctx.assessment,
    ...(ctx.override ? { override: ctx.override } : {}),
    executions: [{ ...ctx.execution, previousChainHash: head.chainHash, chainHash, chainSignature: chainSig.signature }],
    recordedAt,
  };
  return signer.sign(record);
}

/**
 * Binds an intent and a record to the exact request: the five objects, the signals and the id.
 * The intent carries only this hash, never the parameters (spec 2.4).
 */
export function transactionHash(hasher: Hasher, tx: ReleaseContext['transaction']): string {
  return hasher.contentHash({
    businessTransactionId: tx.businessTransactionId,
    metadata: tx.metadata,
    authority: tx.authority,
    authorization: tx.authorization,
    intent: tx.intent,
    policy: { ...tx.policy, contentHash: undefined },
    signals: tx.signals,
  });
}

/**
 * What every store checks before it stores a Trust Record in the chain: the chain's head after
 * `record` (its last execution's chainHash). The record must be `id`'s and link to the head it was
 * built from, or the chain would fork: the store stores nothing then (this throws).
 */
export function chainHeadAfter(record: SignedTrustRecord, head: ChainHead, id: string): string {
  if (record.businessTransactionId !== id) throw new Error(`finalize: built a record for '${record.businessTransactionId}', not '${id}'`);
  const chained = record.executions.filter((e) => e.chainHash !== undefined);
  const last = record.executions.at(-1);
  if (chained.length === 0 || typeof last?.chainHash !== 'string') {
    throw new Error(`finalize: the record of '${id}' carries no chained execution`);
  }
  if (chained[0]!.previousChainHash !== head.chainHash) {
    throw new Error(`finalize: the record of '${id}' does not link to the chain head`);
  }
  return last.chainHash;
}

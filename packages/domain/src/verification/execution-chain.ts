import type { Hasher, SignatureVerifier } from '../ports/crypto.js';
import { chainHashOf, executionDigest } from '../execution/chain.js';
import type { ExecutionEntry } from '../execution/records.js';
import type { CheckResult } from './records.js';
import { isPlainObject } from '../shared/guards.js';

const CHAIN_FIELDS = ['chainHash', 'chainSignature', 'previousChainHash'] as const;

const has = (o: Record<string, unknown>, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined;

export const passed = (): CheckResult => ({ status: 'PASSED', errors: [] });
export const notApplicable = (): CheckResult => ({ status: 'NOT_APPLICABLE', errors: [] });
export const failed = (errors: string[]): CheckResult => ({ status: 'FAILED', errors });
export const resultOf = (errors: string[]): CheckResult => (errors.length === 0 ? passed() : failed(errors));

/**
 * The execution chain check of a Verification (spec 4.3.13; CONTRACT "Execution chain").
 *
 * - An execution carries all of `chainHash`, `chainSignature`, `previousChainHash`, or none of
 *   them. Only some of them fails. (`previousChainHash: null` counts as carried: it is the first
 *   execution of the deployment.)
 * - An execution with none of them (written before chaining existed) passes, unless a chained
 *   execution precedes it in the record: chaining never stops once it started.
 * - A chained execution's `chainHash` must recompute from `previousChainHash` and the canonical
 *   digest of the execution without its chain fields, and `chainSignature` must verify over
 *   `chainHash` with the record's signing key (`keyId`).
 *
 * A record without executions is NOT_APPLICABLE. The check never throws: whatever cannot be read
 * is a failure naming the execution.
 */
export function checkExecutionChain(
  record: { businessTransactionId?: unknown; keyId?: unknown; executions?: unknown },
  hasher: Hasher,
  verifier: SignatureVerifier,
): CheckResult {
  const executions = record.executions;
  if (!Array.isArray(executions)) return failed(['executions: not a list']);
  if (executions.length === 0) return notApplicable();
  const errors: string[] = [];
  let chainedBefore = false;
  executions.forEach((entry: unknown, i) => {
    const at = `executions[${i}]`;
    if (!isPlainObject(entry)) {
      errors.push(`${at}: not an object`);
      return;
    }
    const present = CHAIN_FIELDS.filter((f) => has(entry, f));
    if (present.length === 0) {
      if (chainedBefore) errors.push(`${at}: carries no chain fields after a chained execution`);
      return;
    }
    chainedBefore = true;
    if (present.length < CHAIN_FIELDS.length) {
      const missing = CHAIN_FIELDS.filter((f) => !present.includes(f));
      errors.push(`${at}: carries only some of chainHash, chainSignature, previousChainHash (missing ${missing.join(', ')})`);
      return;
    }
    const { chainHash, chainSignature, previousChainHash } = entry;
    if (typeof chainHash !== 'string') errors.push(`${at}.chainHash: not a string`);
    if (typeof chainSignature !== 'string') errors.push(`${at}.chainSignature: not a string`);
    if (previousChainHash !== null && typeof previousChainHash !== 'string') errors.push(`${at}.previousChainHash: not a string or null`);
    if (typeof chainHash !== 'string' || typeof chainSignature !== 'string' || (previousChainHash !== null && typeof previousChainHash !== 'string')) return;

    // Spread keeps an own `__proto__` key as data, so the digest covers exactly what was chained.
    const unchained: Record<string, unknown> = { ...entry };
    for (const f of CHAIN_FIELDS) delete unchained[f];
    let expected: string | undefined;
    try {
      const digest = executionDigest(hasher, String(record.businessTransactionId), unchained as unknown as Omit<ExecutionEntry, (typeof CHAIN_FIELDS)[number]>);
      expected = chainHashOf(hasher, previousChainHash as string | null, digest);
    } catch {
      errors.push(`${at}: cannot be canonicalized (RFC 8785)`);
    }
    if (expected !== undefined && expected !== chainHash) errors.push(`${at}.chainHash: does not recompute from previousChainHash and the execution`);

    if (typeof record.keyId !== 'string') {
      errors.push(`${at}.chainSignature: the record has no keyId to verify it with`);
      return;
    }
    const sig = verifier.verifyText(chainHash, { keyId: record.keyId, signature: chainSignature });
    if (!sig.valid) errors.push(...(sig.errors.length > 0 ? sig.errors : ['does not verify']).map((e) => `${at}.chainSignature: ${e.replace(/^signature: /, '')}`));
  });
  return resultOf(errors);
}

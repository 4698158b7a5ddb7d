import { describe, expect, it } from '@jest/globals';
import type { Hasher, SignatureFields, SignatureVerifier } from '../ports/crypto.js';
import { chainHashOf, executionDigest } from '../execution/chain.js';
import type { ExecutionEntry } from '../execution/records.js';
import { checkExecutionChain } from './execution-chain.js';

// --- deterministic fakes (the domain never touches real crypto; only consistency matters) ---------

/** Stable JSON with sorted keys, `undefined` members dropped (like RFC 8785 for these inputs). */
const canonical = (v: unknown): string => {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
};

/** FNV-1a, run four times with different seeds: 32 hex characters, deterministic. */
const fakeHex = (text: string): string =>
  [0x811c9dc5, 0x01000193, 0xdeadbeef, 0x12345678]
    .map((seed) => {
      let h = seed >>> 0;
      for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
      return h.toString(16).padStart(8, '0');
    })
    .join('');

const hasher: Hasher = {
  canonicalize: canonical,
  sha256Hex: fakeHex,
  contentHash: (v) => fakeHex(canonical(v)),
};

const KEY = 'key-1';
const fakeSign = (keyId: string, text: string): string => `sig(${keyId}|${fakeHex(text)})`;

const verifier: SignatureVerifier = {
  verify: () => ({ valid: false, errors: ['not used'] }),
  verifyText: (text: string, sig: SignatureFields) =>
    sig.keyId === KEY && sig.signature === fakeSign(sig.keyId, text)
      ? { valid: true, keyId: sig.keyId, errors: [] }
      : { valid: false, keyId: sig.keyId, errors: ['signature: does not verify'] },
};

// --- fixtures --------------------------------------------------------------------------------------

const ID = '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c';

const bare = (n: number): ExecutionEntry => ({
  executionId: `exec-${n}`,
  connector: 'sandbox',
  action: 'sandbox:echo',
  status: 'SUCCEEDED',
  releasedAt: '2026-01-01T00:00:00.000Z',
  completedAt: '2026-01-01T00:00:01.000Z',
  resultHash: fakeHex(`result-${n}`),
  result: { n },
});

/** Links `entry` after `previous` exactly as buildTrustRecord does. */
const chained = (entry: ExecutionEntry, previous: string | null): ExecutionEntry => {
  const chainHash = chainHashOf(hasher, previous, executionDigest(hasher, ID, entry));
  return { ...entry, previousChainHash: previous, chainHash, chainSignature: fakeSign(KEY, chainHash) };
};

const recordOf = (executions: unknown[]) => ({ businessTransactionId: ID, keyId: KEY, executions });

const check = (executions: unknown[]) => checkExecutionChain(recordOf(executions), hasher, verifier);

describe('execution chain check (spec 4.3.13)', () => {
  const first = chained(bare(1), null);
  const second = chained(bare(2), first.chainHash!);

  it('passes when every execution carries all chain fields and they recompute and verify', () => {
    expect(check([first])).toEqual({ status: 'PASSED', errors: [] });
    expect(check([first, second])).toEqual({ status: 'PASSED', errors: [] });
    expect(check([chained(bare(3), fakeHex('some earlier head'))])).toEqual({ status: 'PASSED', errors: [] });
  });

  it('accepts previousChainHash null (the deployment\'s first execution)', () => {
    expect(first.previousChainHash).toBeNull();
    expect(check([first]).status).toBe('PASSED');
  });

  it('passes executions with no chain fields at all (written before chaining), as long as none precedes them chained', () => {
    expect(check([bare(1)])).toEqual({ status: 'PASSED', errors: [] });
    expect(check([bare(1), bare(2)])).toEqual({ status: 'PASSED', errors: [] });
    // Chaining may start after unchained ones...
    expect(check([bare(1), chained(bare(2), null)]).status).toBe('PASSED');
  });

  it('fails an execution with none of the chain fields after a chained one', () => {
    const r = check([first, bare(2)]);
    expect(r.status).toBe('FAILED');
    expect(r.errors).toEqual(['executions[1]: carries no chain fields after a chained execution']);
  });

  it.each([
    ['chainSignature', { chainSignature: undefined }],
    ['chainHash', { chainHash: undefined }],
    ['previousChainHash', { previousChainHash: undefined }],
    ['chainHash, chainSignature', { chainHash: undefined, chainSignature: undefined }],
    ['chainSignature, previousChainHash', { chainSignature: undefined, previousChainHash: undefined }],
  ])('fails an execution that carries only some of the chain fields (missing %s)', (missing, over) => {
    const partial: Record<string, unknown> = { ...first };
    for (const k of Object.keys(over)) delete partial[k];
    const r = check([partial]);
    expect(r.status).toBe('FAILED');
    expect(r.errors).toEqual([`executions[0]: carries only some of chainHash, chainSignature, previousChainHash (missing ${missing})`]);
    // ... also as the second one, and a partial one counts as chained for what follows.
    expect(check([first, partial]).status).toBe('FAILED');
    expect(check([partial, bare(3)]).errors).toContain('executions[1]: carries no chain fields after a chained execution');
  });

  it('fails a chainHash that does not recompute (wrong hash, changed execution, changed previous hash)', () => {
    const wrongHash = check([{ ...first, chainHash: fakeHex('forged') }]);
    expect(wrongHash.status).toBe('FAILED');
    expect(wrongHash.errors).toContain('executions[0].chainHash: does not recompute from previousChainHash and the execution');
    // The forged hash is not what was signed either.
    expect(wrongHash.errors).toContain('executions[0].chainSignature: does not verify');

    const changed = check([{ ...first, result: { n: 99 } }]);
    expect(changed.errors).toEqual(['executions[0].chainHash: does not recompute from previousChainHash and the execution']);

    const relinked = check([{ ...second, previousChainHash: null }]);
    expect(relinked.errors).toEqual(['executions[0].chainHash: does not recompute from previousChainHash and the execution']);
  });

  it('fails a chainSignature that does not verify with the record\'s key', () => {
    const r = check([{ ...first, chainSignature: fakeSign('other-key', first.chainHash!) }]);
    expect(r).toEqual({ status: 'FAILED', errors: ['executions[0].chainSignature: does not verify'] });
    const noKey = checkExecutionChain({ businessTransactionId: ID, executions: [first] }, hasher, verifier);
    expect(noKey.errors).toEqual(['executions[0].chainSignature: the record has no keyId to verify it with']);
  });

  it('fails mistyped chain fields and malformed executions without throwing', () => {
    expect(check([{ ...first, previousChainHash: 42 }]).errors).toEqual(['executions[0].previousChainHash: not a string or null']);
    expect(check([{ ...first, chainHash: 7 }]).errors).toEqual(['executions[0].chainHash: not a string']);
    expect(check(['nope']).errors).toEqual(['executions[0]: not an object']);
    expect(checkExecutionChain({ businessTransactionId: ID, keyId: KEY, executions: 'x' }, hasher, verifier)).toEqual({ status: 'FAILED', errors: ['executions: not a list'] });
  });

  it('is NOT_APPLICABLE without executions', () => {
    expect(check([])).toEqual({ status: 'NOT_APPLICABLE', errors: [] });
  });
});

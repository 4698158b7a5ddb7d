import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, sign as nodeSign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildTrustRecord, logLeafOf, type ReleaseContext } from '@ets/domain';
import { canonicalize } from '../canonical-json.js';
import type { JwksLike } from '../jwk.js';
import { KeyRing, type SigningMode } from '../key-ring.js';
import { nodeVerifyCrypto } from '../node-verify-crypto.js';
import { KeyRingSigner } from '../record-signer.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import { NoteCheckpointSigner } from '../transparency/checkpoint-signer.js';
import { InMemoryTransparencyLog } from '../transparency/in-memory-log.js';
import { portableVerifyCrypto, type VerifyCrypto } from '../verify-crypto.js';
import { verifyOfflineWith, type OfflineReport } from './verify-offline.js';

/**
 * One verification logic, two sets of primitives: Node's (the service, `ets verify`) and @noble's
 * (browsers, the client library). Every report must be the same, valid or not, or a record would
 * verify in one place and not in the other.
 */
type Json = Record<string, unknown>;
const IMPLEMENTATIONS: [string, VerifyCrypto][] = [
  ['node', nodeVerifyCrypto],
  ['portable', portableVerifyCrypto],
];
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const both = (record: unknown, jwks: JwksLike, options = {}): [OfflineReport, OfflineReport] =>
  [verifyOfflineWith(nodeVerifyCrypto, record, jwks, options), verifyOfflineWith(portableVerifyCrypto, record, jwks, options)];

/** Every leaf path of a JSON value. */
function leaves(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(v) && v.length > 0) return v.flatMap((x: unknown, i) => leaves(x, [...at, i]));
  if (typeof v === 'object' && v !== null && Object.keys(v).length > 0) return Object.entries(v).flatMap(([k, x]) => leaves(x, [...at, k]));
  return [at];
}
function changedAt(root: Json, p: (string | number)[]): Json {
  const copy = clone(root);
  let node = copy as Record<string | number, unknown>;
  for (const k of p.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  const last = p[p.length - 1]!;
  const v = node[last];
  node[last] = typeof v === 'string' ? `${v}x` : typeof v === 'number' ? v + 1 : typeof v === 'boolean' ? !v : 'changed';
  return copy;
}

describe.each(['ed25519', 'hybrid'] as const)('offline verification on Node and on @noble primitives, %s signing', (mode: SigningMode) => {
  const hasher = new Sha256Hasher();
  let jwks: JwksLike;
  const records: Record<string, Json> = {};
  let proof: Json;

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-portable-'));
    dirs.push(dataDir);
    const ring = await KeyRing.open({ dataDir, mode });
    const signer = new KeyRingSigner(ring);
    jwks = clone(ring.jwks());
    const now = '2025-11-21T12:00:00.000Z';
    const ctx: ReleaseContext = {
      transaction: {
        businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
        metadata: { tenantId: 't1' },
        authority: { principalId: 'agent-7', authorityId: 'auth-1' },
        authorization: { authorityId: 'auth-1' },
        intent: { action: 'sandbox:echo', parameters: { amount: 120.5, currency: 'EUR', note: 'é€😀' } },
        policy: { name: 'payments-transfer', version: '1.0.0' },
        signals: { amount: 120.5, country: 'FR' },
      },
      decision: { action: 'approve', reason: 'Within limits', requires_override: false, matchedRuleId: 'ok' },
      policy: { name: 'payments-transfer', version: '1.0.0', contentHash: 'ab'.repeat(32) },
      assessment: {
        authority: { status: 'VERIFIED', callerId: 'agent-7', principalId: 'agent-7', grant: null },
        businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
        execution: { status: 'EXECUTED' },
      },
      execution: {
        executionId: 'e-1',
        connector: 'sandbox',
        action: 'sandbox:echo',
        status: 'SUCCEEDED',
        releasedAt: now,
        completedAt: now,
        resultHash: hasher.contentHash({ echo: 1 }),
        result: { echo: 1 },
      },
    };
    records.trust = clone(await buildTrustRecord({ hasher, signer }, ctx, { chainHash: 'cd'.repeat(32) }, 'agent-7', now)) as unknown as Json;
    records.refusal = clone<Json>(
      await signer.sign<Json>({
        recordType: 'refusal-record',
        businessTransactionId: 'r-1',
        businessTransactionHash: 'cd'.repeat(32),
        callerId: 'agent-7',
        principalId: 'agent-7',
        action: 'sandbox:echo',
        policy: { name: 'payments-transfer', version: '1.0.0' },
        decision: { action: 'reject', reason: 'Country is sanctioned', requires_override: false, matchedRuleId: 'sanctioned' },
        matchedRuleId: 'sanctioned',
        reason: 'Country is sanctioned',
        refusedAt: now,
      }),
    );
    // The answer of attestation-simple's POST /execute: no key id, so every Ed25519 key is tried.
    const statement = { executionId: 'ab'.repeat(32), decision: { action: 'approve', requires_override: true, reason: 'Large', matchedRuleId: 'large' }, execution_state: 'pending_override', runtimeHash: 'cd'.repeat(32) };
    records.simple = { status: 'ok', ...statement, requires_override: true, signature: (await signer.signText(canonicalize(statement))).signature };
    const log = new InMemoryTransparencyLog();
    const leaf = logLeafOf(hasher, records.trust);
    await log.append([logLeafOf(hasher, { other: 1 }), leaf, logLeafOf(hasher, { other: 2 })]);
    const checkpoint = await new NoteCheckpointSigner('ets.example/log', signer, ring).sign(await log.treeHead());
    proof = { ...(await log.inclusionProof(leaf, 3))!, checkpoint: checkpoint.note };
    records.receipt = clone<Json>(
      await signer.sign<Json>({
        recordType: 'receipt',
        receiptId: 'rc-1',
        businessTransactionId: ctx.transaction.businessTransactionId,
        verificationId: 'v-1',
        trustRecordHash: leaf,
        decision: { action: 'approve', reason: 'Within limits', requires_override: false },
        executionStatus: 'EXECUTED',
        issuedAt: now,
        transparency: proof,
      }),
    );
  });

  it('gives the same report, valid, for every record (a transparency proof included)', () => {
    for (const [name, record] of Object.entries(records)) {
      const [node, portable] = both(record, jwks, name === 'trust' ? { transparency: proof } : {});
      expect({ name, report: portable }).toEqual({ name, report: node });
      expect({ name, valid: node.valid, failed: node.checks.filter((c) => !c.ok) }).toEqual({ name, valid: true, failed: [] });
    }
  });

  it('gives the same report, not valid, whatever leaf of a record changes', () => {
    for (const [name, record] of Object.entries(records)) {
      for (const p of leaves(record)) {
        const [node, portable] = both(changedAt(record, p), jwks);
        expect({ name, p, report: portable }).toEqual({ name, p, report: node });
        expect({ name, p, valid: node.valid }).toEqual({ name, p, valid: false });
      }
    }
  });
});

describe('Ed25519 keys and signatures that OpenSSL and @noble might judge differently', () => {
  const message = new TextEncoder().encode('a message');
  const identity = new Uint8Array(32);
  identity[0] = 1;
  // y = p + 1: a non-canonical encoding of the identity point.
  const nonCanonical = new Uint8Array(32).fill(0xff);
  nonCanonical[0] = 0xee;
  nonCanonical[31] = 0x7f;

  it.each(IMPLEMENTATIONS)('%s: refuses small-order and non-canonical keys, for which OpenSSL alone would accept a forged signature', (_name, crypto) => {
    const forged = new Uint8Array(64);
    forged.set(identity); // R = identity, S = 0
    for (const key of [identity, nonCanonical, new Uint8Array(32)]) expect(() => crypto.ed25519(key)(message, forged)).toThrow();
  });

  it.each(IMPLEMENTATIONS)('%s: refuses a non-canonical S (S + L) and accepts the canonical signature', (_name, crypto) => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const raw = Buffer.from((publicKey.export({ format: 'jwk' }) as { x: string }).x, 'base64url');
    const signature = new Uint8Array(nodeSign(null, message, privateKey));
    const L = 2n ** 252n + 27742317777372353535851937790883648493n;
    let s = 0n;
    for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(signature[i]!);
    s += L;
    const malleated = Uint8Array.from(signature);
    for (let i = 32; i < 64; i++, s >>= 8n) malleated[i] = Number(s & 0xffn);
    const verify = crypto.ed25519(raw);
    expect(verify(message, signature)).toBe(true);
    expect(verify(message, malleated)).toBe(false);
    expect(verify(message, signature.subarray(1))).toBe(false);
  });
});

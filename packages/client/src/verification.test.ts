import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InMemoryTransparencyLog, KeyRing, KeyRingSigner, NoteCheckpointSigner, Sha256Hasher, verifyOffline } from '@ets/adapters-crypto';
import { logLeafOf as serviceLeafOf } from '@ets/domain';
import * as browserBuild from './index.js';
import * as nodeBuild from './node.js';

/**
 * What an auditor runs offline, through either build of the client: the same reports as
 * `ets verify` for records, and the transparency log's proofs checked against checkpoints signed
 * by a key of the JWKS. The log here is the in-memory reference log of packages/adapters-crypto
 * with the service's own checkpoint signer, so the proofs are built by hand; the browser test
 * (test/src/browser/client-browser.test.ts) checks the proofs a started server serves at `/log/*`.
 */
type Json = Record<string, unknown>;
const hasher = new Sha256Hasher();
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const BUILDS: [string, typeof browserBuild][] = [
  ['browser build', browserBuild],
  ['Node build', nodeBuild],
];

describe.each(BUILDS)('offline verification through the %s', (_name, client) => {
  let jwks: { keys: Json[] };
  let signer: KeyRingSigner;
  let ring: KeyRing;
  let intent: Json;
  let refusal: Json;
  const log = new InMemoryTransparencyLog();
  const checkpoints: string[] = [];

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-client-'));
    dirs.push(dataDir);
    ring = await KeyRing.open({ dataDir, mode: 'hybrid' });
    signer = new KeyRingSigner(ring);
    jwks = JSON.parse(JSON.stringify(ring.jwks())) as { keys: Json[] };
    const policy = { name: 'p', version: '1.0.0', contentHash: 'ab'.repeat(32) };
    const decision = { action: 'approve', reason: 'ok', requires_override: false, matchedRuleId: 'ok' };
    intent = JSON.parse(
      JSON.stringify(
        await signer.sign({
          recordType: 'execution-intent',
          businessTransactionId: 'tx-1',
          businessTransactionHash: 'cd'.repeat(32),
          action: 'sandbox:echo',
          connector: 'sandbox',
          callerId: 'agent',
          principalId: 'agent',
          policy,
          decision,
          preparedAt: '2026-01-01T00:00:00.000Z',
        }),
      ),
    ) as Json;
    refusal = JSON.parse(
      JSON.stringify(
        await signer.sign({
          recordType: 'refusal-record',
          businessTransactionId: 'tx-2',
          businessTransactionHash: 'cd'.repeat(32),
          callerId: 'agent',
          principalId: 'agent',
          action: 'sandbox:echo',
          policy: { name: 'p', version: '1.0.0' },
          decision: { action: 'reject', reason: 'no', requires_override: false, matchedRuleId: 'no' },
          matchedRuleId: 'no',
          reason: 'no',
          refusedAt: '2026-01-01T00:00:00.000Z',
        }),
      ),
    ) as Json;
    const cpSigner = new NoteCheckpointSigner('ets.example/log', signer, ring);
    await log.append([serviceLeafOf(hasher, intent), serviceLeafOf(hasher, { other: 1 })]);
    checkpoints.push((await cpSigner.sign(await log.treeHead())).note);
    await log.append([serviceLeafOf(hasher, refusal), ...Array.from({ length: 6 }, (_, i) => serviceLeafOf(hasher, { other: i + 2 }))]);
    checkpoints.push((await cpSigner.sign(await log.treeHead())).note);
  });

  it('verifies a record as `ets verify` does, and unwraps a served response', () => {
    for (const record of [intent, refusal]) {
      const report = client.verifyRecord(record, jwks);
      expect(report).toEqual(verifyOffline(record, jwks));
      expect(report.valid).toBe(true);
      expect(report.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['signature', 'pqSignature', 'fields']));
    }
    const served = client.verifyRecord({ intent, status: { state: 'FINALIZED', updatedAt: '2026-01-01T00:00:00.000Z' } }, jwks);
    expect(served).toMatchObject({ kind: 'execution-intent', valid: true, from: 'intent' });
  });

  it('fails a changed record, a record with another key set, and anything that is not a record, without throwing', () => {
    const changed = client.verifyRecord({ ...refusal, reason: 'yes' }, jwks);
    expect(changed.valid).toBe(false);
    expect(changed.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['signature', 'pqSignature', 'consistency']);
    expect(client.verifyRecord(intent, { keys: [] }).valid).toBe(false);
    for (const odd of [null, 'x', [], {}, { recordType: 'nope' }]) expect(client.verifyRecord(odd, jwks).valid).toBe(false);
  });

  it('proves a record is in the log: its leaf, the inclusion proof, the signed checkpoint', async () => {
    const leaf = client.logLeafOf(refusal);
    expect(leaf).toBe(serviceLeafOf(hasher, refusal));
    const proof = { ...(await log.inclusionProof(leaf, 9))!, checkpoint: checkpoints[1]! };
    const result = client.verifyLogInclusion(leaf, proof, jwks);
    expect(result.errors).toEqual([]);
    expect(result.ok && result.checkpoint).toMatchObject({ origin: 'ets.example/log', treeSize: 9, signedBy: [jwks.keys.find((k) => k.kty === 'OKP')!.kid] });
    // The same proof beside the record, as `ets verify` takes an export entry.
    expect(client.verifyRecord({ record: refusal, transparency: proof }, jwks).checks.find((c) => c.name === 'inclusion')).toMatchObject({ ok: true });

    const failures: [string, unknown, RegExp][] = [
      [client.logLeafOf(intent), proof, /does not lead to the checkpoint's root/],
      [leaf, { ...proof, leafIndex: 3 }, /does not lead/],
      [leaf, { ...proof, treeSize: 8 }, /checkpoint is for size 9/],
      [leaf, { ...proof, checkpoint: checkpoints[1]!.replace('\n9\n', '\n10\n') }, /does not verify/],
      [leaf, { ...proof, checkpoint: checkpoints[0] }, /checkpoint is for size 2/],
      [leaf, { ...proof, hashes: 'x' }, /hashes/],
      [leaf, undefined, /missing/],
    ];
    for (const [l, p, why] of failures) {
      const r = client.verifyLogInclusion(l, p, jwks);
      expect(r.ok).toBe(false);
      expect(r.errors.join('; ')).toMatch(why);
    }
    expect(client.verifyLogInclusion(leaf, proof, { keys: [] }).errors.join()).toMatch(/no signature by a known key/);
  });

  it('checks a signed checkpoint, and that a newer one extends an older one', async () => {
    const opened = client.verifyLogCheckpoint(checkpoints[0], jwks);
    expect(opened.ok && { origin: opened.checkpoint.origin, treeSize: opened.checkpoint.treeSize }).toEqual({ origin: 'ets.example/log', treeSize: 2 });
    expect(client.verifyLogCheckpoint(checkpoints[0]!.replace('\n2\n', '\n3\n'), jwks).ok).toBe(false);
    expect(client.verifyLogCheckpoint(42, jwks).ok).toBe(false);

    const { hashes } = await log.consistencyProof(2, 9);
    const consistent = client.verifyLogConsistency(checkpoints[0], checkpoints[1], hashes, jwks);
    expect(consistent.errors).toEqual([]);
    expect(consistent.ok && [consistent.older.treeSize, consistent.newer.treeSize]).toEqual([2, 9]);
    expect(client.verifyLogConsistency(checkpoints[1], checkpoints[0], hashes, jwks).errors.join()).toMatch(/rollback/);
    expect(client.verifyLogConsistency(checkpoints[0], checkpoints[1], [...hashes].reverse(), jwks).ok).toBe(false);
  });
});

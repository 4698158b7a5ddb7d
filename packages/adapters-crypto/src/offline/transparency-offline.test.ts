import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { logLeafOf, type Receipt, type TransparencyProof } from '@ets/domain';
import { KeyRing, type SigningMode } from '../key-ring.js';
import { KeyRingSigner } from '../record-signer.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import { NoteCheckpointSigner } from '../transparency/checkpoint-signer.js';
import { InMemoryTransparencyLog } from '../transparency/in-memory-log.js';
import { unwrapServedRecord } from './unwrap.js';
import { verifyOffline } from './node.js';
import type { OfflineReport } from './verify-offline.js';

type Json = Record<string, unknown>;
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});
const failed = (r: OfflineReport): string[] => r.checks.filter((c) => !c.ok).map((c) => c.name);
const detail = (r: OfflineReport, name: string): string | undefined => r.checks.find((c) => c.name === name)?.detail;
const hasher = new Sha256Hasher();

describe.each(['ed25519', 'hybrid'] as const)('verifyOffline with transparency proofs, %s signing', (mode: SigningMode) => {
  let signer: KeyRingSigner;
  let jwks: { keys: unknown[] };
  let log: InMemoryTransparencyLog;
  let checkpoint: string;
  const trustRecordHash = logLeafOf(hasher, { recordType: 'execution-trust-record', n: 'the one' });

  const receipt = (fields: Partial<Receipt> = {}): Promise<Json> =>
    signer.sign({
      recordType: 'receipt',
      receiptId: 'r-1',
      businessTransactionId: '7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c',
      verificationId: 'v-1',
      trustRecordHash,
      decision: { action: 'approve', reason: 'Within limits', requires_override: false },
      executionStatus: 'EXECUTED',
      issuedAt: '2025-11-21T12:00:00.000Z',
      ...fields,
    }) as unknown as Promise<Json>;
  const proofOf = async (leaf: string): Promise<TransparencyProof> => {
    const head = await log.treeHead();
    return { ...(await log.inclusionProof(leaf, head.treeSize))!, checkpoint };
  };

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-offline-tlog-'));
    dirs.push(dataDir);
    const ring = await KeyRing.open({ dataDir, mode });
    signer = new KeyRingSigner(ring);
    jwks = JSON.parse(JSON.stringify(ring.jwks())) as { keys: unknown[] };
    log = new InMemoryTransparencyLog();
    const others = Array.from({ length: 8 }, (_, i) => logLeafOf(hasher, { other: i }));
    await log.append([...others.slice(0, 3), trustRecordHash, ...others.slice(3)]);
    const cp = await new NoteCheckpointSigner('ets.example/log', signer, ring).sign(await log.treeHead());
    await log.saveCheckpoint(cp);
    checkpoint = cp.note;
  });

  it("a Receipt's transparency proves its Trust Record against the signed checkpoint", async () => {
    const report = verifyOffline(await receipt({ transparency: await proofOf(trustRecordHash) }), jwks);
    expect(failed(report)).toEqual([]);
    expect(report.checks.map((c) => c.name)).toContain('transparency');
    expect(detail(report, 'transparency')).toMatch(/^the Trust Record is leaf 3 of 9 in the checkpoint of ets\.example\/log signed by ed25519-/);
    // A Receipt without one is checked as before.
    expect(verifyOffline(await receipt(), jwks).checks.map((c) => c.name)).not.toContain('transparency');
  });

  it('fails the transparency check (and only it) for a proof of another record, a changed checkpoint or size', async () => {
    const good = await proofOf(trustRecordHash);
    const other = await proofOf(logLeafOf(hasher, { other: 5 }));
    const cases: [Partial<TransparencyProof>, RegExp][] = [
      [other, /transparency\.hashes: the inclusion proof does not lead/],
      [{ ...good, leafIndex: 4 }, /transparency\.hashes/],
      [{ ...good, hashes: good.hashes.slice(1) }, /transparency\.hashes/],
      [{ ...good, treeSize: 8 }, /transparency\.treeSize: 8, but the checkpoint is for size 9/],
      [{ ...good, checkpoint: checkpoint.replace('\n9\n', '\n10\n') }, /transparency\.checkpoint: the signature by .* does not verify/],
    ];
    for (const [transparency, why] of cases) {
      const report = verifyOffline(await receipt({ transparency: transparency as TransparencyProof }), jwks);
      expect(failed(report)).toEqual(['transparency']);
      expect(detail(report, 'transparency')).toMatch(why);
    }
    const malformed = verifyOffline(await receipt({ transparency: { ...good, hashes: 'x' } as unknown as TransparencyProof }), jwks);
    expect(failed(malformed)).toEqual(['fields', 'transparency']);
    // Keys of another deployment: neither the receipt nor its checkpoint verifies.
    const stranger = verifyOffline(await receipt({ transparency: good }), { keys: [] });
    expect(failed(stranger)).toEqual(['signature', ...(mode === 'hybrid' ? ['pqSignature'] : []), 'transparency']);
    expect(detail(stranger, 'transparency')).toMatch(/no signature by a known key/);
  });

  it('a proof served beside a record proves the record itself (check `inclusion`)', async () => {
    const record = await receipt({ receiptId: 'r-2' });
    const leaf = logLeafOf(hasher, record);
    await log.append([leaf]);
    const cp = await new NoteCheckpointSigner('ets.example/log', signer, { publicKey: (kid) => jwks.keys.find((k) => (k as Json).kid === kid) as never }).sign(
      await log.treeHead(),
    );
    const transparency = { ...(await log.inclusionProof(leaf, cp.treeSize))!, checkpoint: cp.note };

    const unwrapped = unwrapServedRecord({ record, transparency });
    expect(unwrapped).toEqual({ record, from: 'record', transparency });
    const report = verifyOffline(unwrapped.record, jwks, { transparency: unwrapped.transparency });
    expect(failed(report)).toEqual([]);
    expect(detail(report, 'inclusion')).toMatch(/^the record is leaf 9 of 10/);

    const changed = verifyOffline({ ...record, receiptId: 'r-3' }, jwks, { transparency });
    expect(failed(changed)).toEqual(['signature', ...(mode === 'hybrid' ? ['pqSignature'] : []), 'inclusion']);
  });
});

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign as nodeSign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { logLeafOf, type LogCheckpoint } from '@ets/domain';
import { KeyRing } from '../key-ring.js';
import { KeyRingSigner } from '../record-signer.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import { fromBase64, toBase64, toHex, utf8 } from './bytes.js';
import { CheckpointError, formatCheckpoint, openCheckpoint, parseCheckpoint } from './checkpoint.js';
import { NoteCheckpointSigner } from './checkpoint-signer.js';
import { InMemoryTransparencyLog } from './in-memory-log.js';
import { checkConsistency, checkInclusion } from './log-proofs.js';
import { jwksNoteVerifiers, nodeEd25519Verify } from './node-ed25519.js';
import {
  ed25519NoteKeyId,
  ed25519NoteVerifier,
  formatKeyId,
  formatSignedNote,
  NoteError,
  openSignedNote,
  parseSignedNote,
  parseVerifierKey,
  signatureLine,
} from './signed-note.js';

const vkey = (k: string) => parseVerifierKey(k, nodeEd25519Verify);

// ---- published vectors -------------------------------------------------------------------------

// C2SP/C2SP signed-note.md, "Example" (commit 5ba5ee830903e91240fc6f9f3a7a9293d49e69c9).
const C2SP_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
const C2SP_NOTE =
  'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';

// C2SP/C2SP tlog-checkpoint.md, the example checkpoint (same commit).
const C2SP_CHECKPOINT_TEXT = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';

// transparency-dev/formats log/note_test.go (commit 0b850f1a7b4a5b70deeacac6535e4b8023809d21):
// a sum.golang.org checkpoint, its log key, three witnesses' keys and signatures over it.
const SUMDB_VKEY = 'sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8';
const SUMDB_NOTE =
  'go.sum database tree\n6476701\nmb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=\n\n— sum.golang.org Az3grsLX85Gz+s1SiTbgkuqxgItqFq7gsMUEyVnrsa9LM7Us9S+1xbFIGu95949rj4nPRYfvimWEPWL+o3GeoWwOoAw=\n';
const WITNESS_VKEYS = [
  'monkeys+db4d9f7e+AULaJMvTtDLHPUcUrjdDad9vDlh/PTfC2VV60JUtCfWT',
  'bananas+cf639f13+AaPjhFnPCQnid/Ql32KWhmh+uk72FVRfK+2DLmO3BI3M',
  'witness+f13a86db+AdYV1Ztajd9BvyjP2HgpwrqYL6TjOwIjGMOq8Bu42xbN',
];
const WITNESS_LINES = [
  '— monkeys 202ffh9ve46Mqbhuyb4wnC2Pwdan5EsXQym/tF1ggXJqhjGosU4T5intH4iKMRgDLxrnXuIjRaU2NbvAnaepM6Y+8ww=\n',
  '— bananas z2OfE+2bbsBZ7NLgfuslc0v7NFW2QyexJ7fhePpoL2N/P7N/COd5S+JNHbQEAlYzz2C5sg0E+x/MggS1mDR6t3/9rQw=\n',
  '— witness 8TqG25yWGFLdT7WPf/WoyeG3LwqtkXP+8S3yykOVm6EMh4hPgCke6eSVPU4BdtXNMPJBXKF+UpDbGgCdcpR8SVSoqAU=\n',
];
// The same file's Go-format key pair for the log "Log" (seed in the private key, after the type byte).
const LOG_VKEY = 'Log+2271c621+AemuH5ooBpEPcr+W8onrjA1NfuzBVHdezakU81Ekarvs';
const LOG_SKEY = 'PRIVATE+KEY+Log+2271c621+AdEIq9FLRQni54Wg68T96VJO+iayOaulswav2DUMKgvQ';
// transparency-dev/formats log/checkpoint_test.go: bodies that are not checkpoints.
const NOT_CHECKPOINTS = [
  'Head\n9944\n',
  '\n9944\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n',
  'Log\n123\nYmFuYW5hcw==',
  'Log\nbananas\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n',
  'Log\n-34\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n',
  'Log\n3438945738945739845734895735\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n',
  "Log\n123\nThisIsn'tBase64\n",
];

/** The Ed25519 key of a Go-format private key (`PRIVATE+KEY+<name>+<id>+base64(0x01 ‖ seed)`). */
function goPrivateKey(skey: string) {
  const blob = fromBase64(skey.split('+').slice(4).join('+'))!;
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), blob.subarray(1)]);
  return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
}

/** Key ID by the spec's formula, computed with node:crypto. */
const specKeyId = (name: string, pub: Uint8Array): string =>
  createHash('sha256').update(Buffer.concat([Buffer.from(name, 'utf8'), Buffer.from([0x0a, 0x01]), pub])).digest('hex').slice(0, 8);

describe('signed notes and checkpoints: published vectors', () => {
  it('verifies the C2SP signed-note example with its verifier key', () => {
    expect(openSignedNote(C2SP_NOTE, [vkey(C2SP_VKEY)])).toEqual({ text: 'This is an example message.\n', verifiedBy: ['example.com/foo'] });
  });

  it('verifies the sum.golang.org checkpoint and its witness cosignatures, ignoring unknown keys', () => {
    const cp = openCheckpoint(SUMDB_NOTE, [vkey(SUMDB_VKEY)]);
    expect(cp).toMatchObject({ origin: 'go.sum database tree', treeSize: 6476701, signedBy: ['sum.golang.org'] });
    expect(toBase64(cp.rootHash)).toBe('mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=');

    const cosigned = SUMDB_NOTE + WITNESS_LINES.join('');
    const all = [SUMDB_VKEY, ...WITNESS_VKEYS].map(vkey);
    expect(openSignedNote(cosigned, all).verifiedBy).toEqual(['sum.golang.org', 'monkeys', 'bananas', 'witness']);
    expect(openSignedNote(cosigned, [vkey(WITNESS_VKEYS[1]!)]).verifiedBy).toEqual(['bananas']);
    // formats' "random1"/"random2": a copied signature under unknown names is ignored.
    const withUnknown = cosigned + WITNESS_LINES[2]!.replace('witness', 'random1');
    expect(openSignedNote(withUnknown, all).verifiedBy).toHaveLength(4);
  });

  it('computes key IDs as the vectors do, and rejects a verifier key whose ID does not match', () => {
    for (const k of [C2SP_VKEY, SUMDB_VKEY, LOG_VKEY, ...WITNESS_VKEYS]) {
      const [name, id, ...rest] = k.split('+') as [string, string, ...string[]];
      const material = rest.join('+');
      const pub = fromBase64(material)!.subarray(1);
      expect(formatKeyId(ed25519NoteKeyId(name, pub))).toBe(id);
      expect(specKeyId(name, pub)).toBe(id);
    }
    expect(() => vkey(LOG_VKEY.replace('2271c621', '2271c622'))).toThrow(NoteError);
    expect(() => vkey('Log+2271c621+AwEB')).toThrow(NoteError);
  });

  it('signs a checkpoint that verifies with the Go-format key pair of formats (interoperable key ID and line)', () => {
    const key = goPrivateKey(LOG_SKEY);
    const pub = new Uint8Array(Buffer.from(createPublicKey(key).export({ format: 'jwk' }).x!, 'base64url'));
    expect(toBase64(pub)).toBe(toBase64(fromBase64(LOG_VKEY.split('+').slice(2).join('+'))!.subarray(1)));
    const text = formatCheckpoint({ origin: 'TestParseCheckpoint', treeSize: 42, rootHash: new Uint8Array(32).fill(7) });
    const note = formatSignedNote(text, [signatureLine('Log', ed25519NoteKeyId('Log', pub), nodeSign(null, Buffer.from(text), key))]);
    expect(openCheckpoint(note, [vkey(LOG_VKEY)])).toMatchObject({ origin: 'TestParseCheckpoint', treeSize: 42, signedBy: ['Log'] });
  });

  it('parses the C2SP checkpoint example and refuses the formats non-checkpoints', () => {
    const cp = parseCheckpoint(C2SP_CHECKPOINT_TEXT);
    expect(cp).toMatchObject({ origin: 'example.com/behind-the-sofa', treeSize: 20852163, extensions: [] });
    expect(formatCheckpoint(cp)).toBe(C2SP_CHECKPOINT_TEXT);
    for (const text of NOT_CHECKPOINTS) expect(() => parseCheckpoint(text)).toThrow(CheckpointError);
    expect(parseCheckpoint(`${C2SP_CHECKPOINT_TEXT}ext one\n`).extensions).toEqual(['ext one']);
    for (const bad of [`${C2SP_CHECKPOINT_TEXT}\n`, C2SP_CHECKPOINT_TEXT.replace('20852163', '020852163'), C2SP_CHECKPOINT_TEXT.replace('=\n', '\n')]) {
      expect(() => parseCheckpoint(bad)).toThrow(CheckpointError);
    }
  });
});

describe('signed notes: what is refused', () => {
  const verifier = vkey(SUMDB_VKEY);
  const [text, sigs] = SUMDB_NOTE.split('\n\n') as [string, string];

  it.each([
    ['a changed text', SUMDB_NOTE.replace('6476701', '6476702')],
    ['a changed signature', SUMDB_NOTE.replace('Az3grsLX85', 'Az3grsLX86')],
    ['no signature by a known key', SUMDB_NOTE.replace('sum.golang.org Az3gr', 'sum.golang.com Az3gr')],
    ['a known name with another key ID', SUMDB_NOTE.replace('Az3grsLX', 'Az3grtLX')],
    ['a known key that fails beside one that verifies', SUMDB_NOTE + '— sum.golang.org Az3grsLX85Gz+s1SiTbgkuqxgItqFq7gsMUEyVnrsa9LM7Us9S+1xbFIGu95949rj4nPRYfvimWEPWL+o3GeoWwOoAw=\n'.replace('Gz+s', 'Gz+t')],
    ['no blank line', SUMDB_NOTE.replace('\n\n', '\n')],
    ['no final newline', SUMDB_NOTE.slice(0, -1)],
    ['a carriage return', SUMDB_NOTE.replace('tree\n', 'tree\r\n')],
    ['a tab in the text', SUMDB_NOTE.replace('go.sum ', 'go.sum\t')],
    ['a lone surrogate', SUMDB_NOTE.replace('go.sum', 'go\ud800sum')],
    ['non-canonical base64', `${text}\n\n${sigs.replace('oAw=', 'oAx=')}`],
    ['a hyphen instead of the em dash', SUMDB_NOTE.replace('— ', '- ')],
    ['a key name with a plus', SUMDB_NOTE.replace('sum.golang.org A', 'sum+golang.org A')],
    ['a signature too short for a key ID', `${text}\n\n— sum.golang.org AQID\n`],
    ['an empty signature line', `${SUMDB_NOTE}\n`],
    ['too many signatures', SUMDB_NOTE + WITNESS_LINES[0]!.repeat(100)],
  ])('refuses %s', (_what, note) => {
    expect(() => openCheckpoint(note, [verifier])).toThrow(NoteError);
  });

  it('refuses a checkpoint "signed" under a small-order key, whose signature (identity, 0) OpenSSL accepts for any message', () => {
    const identity = new Uint8Array(32);
    identity[0] = 1;
    const forged = new Uint8Array(64);
    forged[0] = 1;
    const text = formatCheckpoint({ origin: 'ets.example/log', treeSize: 1, rootHash: new Uint8Array(32) });
    const message = utf8(text);
    expect(() => nodeEd25519Verify(identity, message, forged)).toThrow('a small-order Ed25519 key');
    const jwks = { keys: [{ kty: 'OKP', crv: 'Ed25519', x: Buffer.from(identity).toString('base64url'), kid: 'weak' }] };
    const note = formatSignedNote(text, [signatureLine('weak', ed25519NoteKeyId('weak', identity), forged)]);
    expect(() => openCheckpoint(note, jwksNoteVerifiers(jwks))).toThrow(NoteError);
  });

  it('refuses to make a note of a bad text or with no signature', () => {
    expect(() => formatSignedNote('no newline', ['— a AAAAAAA=\n'])).toThrow(NoteError);
    expect(() => formatSignedNote('ok\n', [])).toThrow(NoteError);
    expect(() => formatCheckpoint({ origin: 'a\nb', treeSize: 1, rootHash: new Uint8Array(32) })).toThrow(CheckpointError);
    expect(() => formatCheckpoint({ origin: 'o', treeSize: -1, rootHash: new Uint8Array(32) })).toThrow(CheckpointError);
    expect(() => ed25519NoteVerifier('has space', new Uint8Array(32), nodeEd25519Verify)).toThrow(NoteError);
    expect(parseSignedNote(C2SP_NOTE).signatures[0]).toMatchObject({ keyName: 'example.com/foo', keyId: 0x530d903a });
  });
});

// ---- the service's own checkpoints, proofs and offline checks ------------------------------------

describe('checkpoints signed by the key ring, checked with only the JWKS', () => {
  const dirs: string[] = [];
  let ring: KeyRing;
  let signer: NoteCheckpointSigner;
  let log: InMemoryTransparencyLog;
  const hasher = new Sha256Hasher();
  const records = Array.from({ length: 21 }, (_, i) => ({ recordType: 'receipt', n: i }));
  const leaves = records.map((r) => logLeafOf(hasher, r));

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-tlog-'));
    dirs.push(dataDir);
    ring = await KeyRing.open({ dataDir, mode: 'ed25519' });
    signer = new NoteCheckpointSigner('ets.example/log', new KeyRingSigner(ring), ring);
    log = new InMemoryTransparencyLog();
  });
  afterAll(() => {
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  const checkpointAfter = async (batch: string[]): Promise<LogCheckpoint> => {
    if (batch.length > 0) await log.append(batch);
    const cp = await signer.sign(await log.treeHead());
    await log.saveCheckpoint(cp);
    return cp;
  };

  it('names the key by its kid, with the key ID of the signed-note spec, and verifies with the JWKS', async () => {
    const empty = await checkpointAfter([]);
    const kid = ring.activeKeyIds.keyId;
    expect(empty).toMatchObject({ origin: 'ets.example/log', treeSize: 0, keyId: kid });
    expect(empty.rootHash).toBe(createHash('sha256').digest('hex'));
    const { x } = ring.publicKey(kid) as { x: string };
    const line = empty.note.split('\n\n')[1]!;
    expect(line.startsWith(`— ${kid} `)).toBe(true);
    expect(toHex(fromBase64(line.trim().split(' ')[2])!.subarray(0, 4))).toBe(specKeyId(kid, Buffer.from(x, 'base64url')));
    expect(openCheckpoint(empty.note, jwksNoteVerifiers(JSON.parse(JSON.stringify(ring.jwks())))).signedBy).toEqual([kid]);
    expect(() => openCheckpoint(empty.note, jwksNoteVerifiers({ keys: [] }))).toThrow(NoteError);
  });

  it('proves inclusion of records and consistency between checkpoints, offline', async () => {
    const first = await checkpointAfter(leaves.slice(0, 8));
    const second = await checkpointAfter(leaves.slice(8));
    const jwks = jwksNoteVerifiers(ring.jwks());

    for (const [i, leaf] of leaves.entries()) {
      const proof = (await log.inclusionProof(leaf, second.treeSize))!;
      expect(proof.leafIndex).toBe(i);
      const check = checkInclusion(leaf, { ...proof, checkpoint: second.note }, jwks);
      expect(check).toMatchObject({ ok: true, errors: [] });
      expect(checkInclusion(leaf, { ...proof, checkpoint: first.note }, jwks).ok).toBe(false);
    }
    expect(await log.inclusionProof(leaves[9]!, first.treeSize)).toBeUndefined();

    const { hashes } = await log.consistencyProof(first.treeSize, second.treeSize);
    expect(checkConsistency(first.note, second.note, hashes, jwks)).toMatchObject({ ok: true });
    expect(checkConsistency(second.note, first.note, [], jwks)).toMatchObject({ ok: false, errors: [expect.stringContaining('rollback')] });
    expect(checkConsistency(first.note, second.note, hashes.slice(1), jwks).ok).toBe(false);
    const empty = (await log.checkpointAt(0))!;
    expect(checkConsistency(empty.note, second.note, [], jwks).ok).toBe(true);
  });

  it('names what is wrong with a bad transparency proof', async () => {
    const cp = (await log.latestCheckpoint())!;
    const proof = { ...(await log.inclusionProof(leaves[3]!, cp.treeSize))!, checkpoint: cp.note };
    const jwks = jwksNoteVerifiers(ring.jwks());
    const errorsOf = (leaf: string, p: unknown) => checkInclusion(leaf, p, jwks).errors.join('; ');
    expect(errorsOf(leaves[4]!, proof)).toMatch(/^transparency\.hashes: the inclusion proof does not lead/);
    expect(errorsOf(leaves[3]!, { ...proof, leafIndex: 4 })).toMatch(/transparency\.hashes/);
    expect(errorsOf(leaves[3]!, { ...proof, treeSize: 8 })).toMatch(/^transparency\.treeSize: 8, but the checkpoint is for size 21/);
    expect(errorsOf(leaves[3]!, { ...proof, hashes: ['zz'] })).toMatch(/^transparency\.hashes\[0\]: not a lower-case hex/);
    expect(errorsOf(leaves[3]!, { ...proof, checkpoint: cp.note.replace('\n21\n', '\n22\n') })).toMatch(/^transparency\.checkpoint: the signature by .* does not verify/);
    expect(errorsOf(leaves[3]!, { ...proof, checkpoint: undefined })).toBe('transparency.checkpoint: missing');
    expect(errorsOf(leaves[3]!, 'nope')).toBe('transparency: not an object');

    // A checkpoint signed by another key under the same kid (a forger without the private key).
    const { privateKey } = generateKeyPairSync('ed25519');
    const text = cp.note.split('\n\n')[0]! + '\n';
    const forged = cp.note.replace(/ \S+\n$/, ` ${toBase64(new Uint8Array([...fromBase64(cp.note.trim().split(' ').pop())!.subarray(0, 4), ...nodeSign(null, utf8(text), privateKey)]))}\n`);
    expect(errorsOf(leaves[3]!, { ...proof, checkpoint: forged })).toMatch(/does not verify/);
  });

  it('keeps checkpoints growing: a smaller or a wrong one is refused', async () => {
    const latest = (await log.latestCheckpoint())!;
    await expect(log.saveCheckpoint((await log.checkpointAt(8))!)).rejects.toThrow();
    await expect(log.saveCheckpoint({ ...latest, rootHash: '00'.repeat(32) })).rejects.toThrow();
    await expect(signer.sign({ treeSize: 1, rootHash: 'not hex' })).rejects.toThrow(CheckpointError);
    expect(() => new NoteCheckpointSigner('', new KeyRingSigner(ring), ring)).toThrow(CheckpointError);
  });
});

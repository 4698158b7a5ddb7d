import { createHash, createPublicKey, verify } from 'node:crypto';
import { createRequire } from 'node:module';
import type { DataSource } from 'typeorm';

// An independent RFC 9162 / C2SP implementation for the tests: node:crypto, the `canonicalize`
// package for RFC 8785, and the RFCs' own algorithms written out here. Nothing of this project's
// code computes or checks anything in this file, so a test that agrees with it agrees with the RFC,
// not with itself.

const canonicalize = createRequire(import.meta.url)('canonicalize') as (value: unknown) => string;
const sha256 = (...parts: Buffer[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

/** The leaf input of a signed record as served: H(C(record)), hex. */
export const leafOf = (record: unknown): string => sha256(Buffer.from(canonicalize(record), 'utf8')).toString('hex');

const leafHash = (leafInputHex: string): Buffer => sha256(Buffer.of(0), Buffer.from(leafInputHex, 'hex'));
const nodeHash = (left: Buffer, right: Buffer): Buffer => sha256(Buffer.of(1), left, right);

/** MTH(D[n]) of RFC 9162 §2.1.1 over hex leaf inputs, hex. */
export function treeHash(leafInputs: readonly string[]): string {
  const mth = (start: number, end: number): Buffer => {
    const n = end - start;
    if (n === 0) return sha256();
    if (n === 1) return leafHash(leafInputs[start]!);
    let k = 1;
    while (k * 2 < n) k *= 2;
    return nodeHash(mth(start, start + k), mth(start + k, end));
  };
  return mth(0, leafInputs.length).toString('hex');
}

/** RFC 9162 §2.1.3.2, step for step. */
export function inclusionHolds(leafIndex: number, treeSize: number, leafInputHex: string, proof: readonly string[], rootHex: string): boolean {
  if (leafIndex >= treeSize) return false;
  let fn = leafIndex;
  let sn = treeSize - 1;
  let r: Buffer = leafHash(leafInputHex);
  for (const p of proof.map((h) => Buffer.from(h, 'hex'))) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.toString('hex') === rootHex;
}

/** RFC 9162 §2.1.4.2, step for step (first size ≥ 1). */
export function consistencyHolds(first: number, second: number, firstRootHex: string, secondRootHex: string, proof: readonly string[]): boolean {
  if (first < 1 || first > second) return false;
  if (first === second) return proof.length === 0 && firstRootHex === secondRootHex;
  const path = proof.map((h) => Buffer.from(h, 'hex'));
  if ((first & (first - 1)) === 0) path.unshift(Buffer.from(firstRootHex, 'hex'));
  let fn = first - 1;
  let sn = second - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr: Buffer = path[0]!;
  let sr: Buffer = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && fr.toString('hex') === firstRootHex && sr.toString('hex') === secondRootHex;
}

export interface OpenedCheckpoint {
  origin: string;
  treeSize: number;
  rootHash: string;
  keyName: string;
}

/**
 * A C2SP signed note holding a tlog-checkpoint, checked against an Ed25519 key of the JWKS named
 * by the signature line (key ID = SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4]). Throws when it does not verify.
 */
export function openCheckpointNote(note: string, jwks: { keys: Record<string, unknown>[] }): OpenedCheckpoint {
  const split = note.lastIndexOf('\n\n');
  const text = note.slice(0, split + 1);
  const m = /^\u2014 (\S+) (\S+)\n$/u.exec(note.slice(split + 2));
  if (split < 0 || !m) throw new Error('not a signed note with one signature');
  const [, keyName, blob] = m;
  const jwk = jwks.keys.find((k) => k.kid === keyName && k.kty === 'OKP' && k.crv === 'Ed25519');
  if (!jwk) throw new Error(`no Ed25519 key ${keyName} in the JWKS`);
  const publicKey = Buffer.from(jwk.x as string, 'base64url');
  const bytes = Buffer.from(blob!, 'base64');
  const keyId = sha256(Buffer.from(keyName!, 'utf8'), Buffer.of(0x0a, 0x01), publicKey).subarray(0, 4);
  if (!bytes.subarray(0, 4).equals(keyId)) throw new Error('the key ID does not match the key');
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x as string }, format: 'jwk' });
  if (!verify(null, Buffer.from(text, 'utf8'), key, bytes.subarray(4))) throw new Error('the signature does not verify');
  const [origin, size, root, ...rest] = text.slice(0, -1).split('\n');
  if (rest.length > 0 || !/^(0|[1-9]\d*)$/.test(size!)) throw new Error('not a checkpoint');
  return { origin: origin!, treeSize: Number(size), rootHash: Buffer.from(root!, 'base64').toString('hex'), keyName: keyName! };
}

/** Where each kind of signed record is stored, and how its body (as served) is read. */
export const SIGNED_RECORD_TABLES = [
  { kind: 'trust-record', table: 'trust_records', id: 'business_transaction_id', body: 'body' },
  // A held transaction's record without executions, once the transaction was decided.
  { kind: 'held-trust-record', table: 'held_transactions', id: 'business_transaction_id', body: 'held_record', where: 'held_record IS NOT NULL' },
  { kind: 'refusal', table: 'refusal_records', id: 'business_transaction_id', body: 'body' },
  { kind: 'intent', table: 'execution_intents', id: 'business_transaction_id', body: 'intent' },
  { kind: 'verification', table: 'verifications', id: 'id', body: 'body' },
  { kind: 'receipt', table: 'receipts', id: 'id', body: 'body' },
  { kind: 'audit-event', table: 'audit_events', id: 'event_id', body: 'body' },
  { kind: 'attestation', table: 'attestation_decisions', id: 'execution_id', body: 'attestation' },
  { kind: 'override-resolution', table: 'attestation_overrides', id: 'override_id', body: 'resolution' },
  { kind: 'runtime-manifest', table: 'runtime_manifests', id: 'manifest_hash', body: 'body' },
  // A compact JWS, served as a JSON string.
  { kind: 'confirmation-proof', table: 'attestation_confirmation_proofs', id: 'proof_id', body: 'proof', asString: true },
] as const;

export type LoggedKind = (typeof SIGNED_RECORD_TABLES)[number]['kind'];

/** `<kind> <id> <leaf>` of every stored signed record, sorted. */
export async function storedRecordLeaves(ds: DataSource): Promise<string[]> {
  const out: string[] = [];
  for (const t of SIGNED_RECORD_TABLES) {
    const rows = (await ds.query(`SELECT ${t.id} AS id, ${t.body} AS body FROM ${t.table}${'where' in t ? ` WHERE ${t.where}` : ''}`)) as { id: string; body: string }[];
    for (const r of rows) out.push(`${t.kind} ${r.id} ${leafOf('asString' in t ? r.body : JSON.parse(r.body))}`);
  }
  return out.sort();
}

export interface LogRow {
  index: number;
  leaf: string;
  kind: string;
  id: string;
}

export async function logRows(ds: DataSource): Promise<LogRow[]> {
  const rows = (await ds.query('SELECT leaf_index, leaf, record_kind, record_id FROM transparency_log_leaves ORDER BY leaf_index')) as {
    leaf_index: string | number;
    leaf: string;
    record_kind: string;
    record_id: string;
  }[];
  return rows.map((r) => ({ index: Number(r.leaf_index), leaf: r.leaf, kind: r.record_kind, id: r.record_id }));
}

/**
 * The log matches the records exactly: its leaves are dense from 0, one per stored signed record
 * (same kind, id and H(C(record))), the head's size and root are those of the leaves (MTH computed
 * here), and every kept checkpoint's root is the root of the leaves it covers.
 */
export async function logMatchingRecords(ds: DataSource): Promise<{ problems: string[]; size: number; kinds: Record<string, number> }> {
  const rows = await logRows(ds);
  const problems: string[] = [];
  rows.forEach((r, i) => {
    if (r.index !== i) problems.push(`leaf index ${r.index} at position ${i}`);
  });
  const logged = rows.map((r) => `${r.kind} ${r.id} ${r.leaf}`).sort();
  const stored = await storedRecordLeaves(ds);
  const missing = stored.filter((x) => !logged.includes(x));
  const extra = logged.filter((x) => !stored.includes(x));
  if (missing.length > 0) problems.push(`records without their leaf: ${missing.slice(0, 5).join('; ')}${missing.length > 5 ? ` (+${missing.length - 5})` : ''}`);
  if (extra.length > 0) problems.push(`leaves without their record: ${extra.slice(0, 5).join('; ')}${extra.length > 5 ? ` (+${extra.length - 5})` : ''}`);
  if (logged.length !== stored.length) problems.push(`${logged.length} leaves for ${stored.length} records`);
  const leaves = rows.map((r) => r.leaf);
  const [head] = (await ds.query('SELECT tree_size, root_hash FROM transparency_log_head WHERE id = 1')) as { tree_size: string | number; root_hash: string }[];
  if (Number(head!.tree_size) !== leaves.length) problems.push(`the head says ${head!.tree_size} leaves, the table holds ${leaves.length}`);
  if (head!.root_hash !== treeHash(leaves)) problems.push('the head root is not the root of the leaves');
  const checkpoints = (await ds.query('SELECT tree_size, root_hash FROM transparency_log_checkpoints ORDER BY tree_size')) as { tree_size: string | number; root_hash: string }[];
  for (const c of checkpoints) {
    if (treeHash(leaves.slice(0, Number(c.tree_size))) !== c.root_hash) problems.push(`the checkpoint of size ${c.tree_size} is not the root of its leaves`);
  }
  const kinds: Record<string, number> = {};
  for (const r of rows) kinds[r.kind] = (kinds[r.kind] ?? 0) + 1;
  return { problems, size: leaves.length, kinds };
}

/**
 * Waits until the checkpoint the server at `url` serves covers every leaf of its log (the
 * publisher signs at most once a second, and lags under load); returns its size. `ets export`
 * writes the tree of the newest checkpoint, so a test that exports everything waits for this.
 */
export async function checkpointCoversLog(url: string, timeoutMs = 30_000): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const size = Number((await (await fetch(`${url}/log/checkpoint`)).text()).split('\n')[1]);
    const { leaves } = (await (await fetch(`${url}/log/leaves?start=${size}&count=1`)).json()) as { leaves: string[] };
    if (leaves.length === 0) return size;
    if (Date.now() > until) throw new Error(`the checkpoint (size ${size}) did not catch up with the log in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

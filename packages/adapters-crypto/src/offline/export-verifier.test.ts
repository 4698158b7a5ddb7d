import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AuthenticationAudit, logLeafOf, type AuditEvent, type Signed } from '@ets/domain';
import type { JwksLike } from '../jwk.js';
import { KeyRing } from '../key-ring.js';
import { KeyRingSigner } from '../record-signer.js';
import { Sha256Hasher } from '../sha256-hasher.js';
import { NoteCheckpointSigner } from '../transparency/checkpoint-signer.js';
import { InMemoryTransparencyLog } from '../transparency/in-memory-log.js';
import { EXPORT_FORMAT, ExportVerifier, type ExportSummary } from './export-verifier.js';

/**
 * The export verifier over generated exports: a log of signed audit events (any kind of record
 * would do: completeness is about leaf indices, not kinds) with a signed checkpoint, written the
 * way `ets export` writes it; then every way a file can lose, gain or move a record.
 */
const hasher = new Sha256Hasher();
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

interface Deployment {
  jwks: { keys: unknown[] };
  /** The export of the whole log: the header, then one line per leaf. */
  lines: string[];
  /** The checkpoint's note. */
  note: string;
  /** The export of a run of it, with its header. */
  runOf(first: number, last: number, period?: object): string[];
}

async function deployment(origin: string, leaves: number): Promise<Deployment> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ets-export-verifier-'));
  dirs.push(dataDir);
  const ring = await KeyRing.open({ dataDir, mode: 'ed25519' });
  const signer = new KeyRingSigner(ring);
  const events: Signed<AuditEvent>[] = [];
  let t = Date.parse('2026-01-01T00:00:00.000Z');
  let n = 0;
  const audit = new AuthenticationAudit(
    signer,
    { append: async (e) => void events.push(e), list: async () => events },
    { now: () => new Date((t += 1000)) },
    { uuid: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` },
  );
  for (let i = 0; i < leaves; i++) await audit.record({ callerId: `agent-${i}`, method: 'POST', route: '/execute', outcome: 'SUCCESS' });
  const log = new InMemoryTransparencyLog();
  await log.append(events.map((e) => logLeafOf(hasher, e)));
  const checkpoint = await new NoteCheckpointSigner(origin, signer, ring).sign(await log.treeHead());
  const records: string[] = [];
  for (const e of events) {
    const proof = (await log.inclusionProof(logLeafOf(hasher, e), checkpoint.treeSize))!;
    records.push(JSON.stringify({ kind: 'audit-event', record: e, transparency: { ...proof, checkpoint: checkpoint.note } }));
  }
  const header = (h: object) => JSON.stringify({ export: { format: EXPORT_FORMAT, checkpoint: checkpoint.note, ...h } });
  return {
    jwks: JSON.parse(JSON.stringify(ring.jwks())) as { keys: unknown[] },
    note: checkpoint.note,
    lines: [header({ leaves: { first: 0, last: leaves - 1 } }), ...records],
    runOf: (first, last, period = { since: '2026-01-01T00:00:00.000Z' }) => [header({ period, leaves: { first, last } }), ...records.slice(first, last + 1)],
  };
}

const verify = (lines: readonly string[], jwks: JwksLike): ExportSummary => {
  const v = new ExportVerifier(jwks);
  for (const l of lines) v.addLine(l);
  return v.summary();
};
/** Line `i` of the file left out, or replaced. */
const without = (lines: readonly string[], ...i: number[]) => lines.filter((_, k) => !i.includes(k));
const replaced = (lines: readonly string[], i: number, line: string) => lines.map((l, k) => (k === i ? line : l));
const failure = (s: ExportSummary) => ({ valid: s.valid, line: s.firstFailure?.line, kind: s.firstFailure?.kind, problems: s.firstFailure?.problems.join('; ') });

describe('ExportVerifier: completeness is part of validity', () => {
  const LEAVES = 12;
  let d: Deployment;
  let other: Deployment;

  beforeAll(async () => {
    [d, other] = await Promise.all([deployment('ets.example/log', LEAVES), deployment('other.example/log', 4)]);
  });

  it('a whole export: every leaf from 0 to the checkpoint, once and in order, is VALID', () => {
    const s = verify(d.lines, d.jwks);
    expect(s).toMatchObject({ valid: true, records: LEAVES, invalid: 0, log: { origin: 'ets.example/log', treeSize: LEAVES, first: 0, last: LEAVES - 1, missing: 0, outOfOrder: 0, unproven: 0 } });
    expect(s.kinds).toEqual({ 'audit-event': { valid: LEAVES, invalid: 0 } });
  });

  it('a removed line, anywhere (first, middle, last), is NOT VALID and named', () => {
    // lines[k] is line k + 1 of the file and holds leaf k - 1 (line 1 is the header).
    expect(failure(verify(without(d.lines, 6), d.jwks))).toEqual({ valid: false, line: 7, kind: 'audit-event', problems: expect.stringMatching(/^leaf: the line is leaf 6, but the run's next leaf is 5: leaf 5 is not in the file here/) });
    expect(failure(verify(without(d.lines, 1), d.jwks))).toMatchObject({ valid: false, line: 2, problems: expect.stringMatching(/leaf 0 is not in the file/) });
    expect(failure(verify(without(d.lines, LEAVES), d.jwks))).toEqual({
      valid: false,
      line: LEAVES + 1,
      kind: 'end of file',
      problems: `leaf: the file ends before leaf ${LEAVES - 1}, the export's run ends at leaf ${LEAVES - 1}: leaf ${LEAVES - 1} is not in the file (removed or left out)`,
    });
    const several = verify(without(d.lines, 3, 4, 9), d.jwks);
    expect(several.log).toMatchObject({ missing: 3, outOfOrder: 0 });
    expect(several.invalid).toBe(2);
  });

  it('a repeated line is NOT VALID, also when a removed one keeps the count right', () => {
    const repeated = [...d.lines.slice(0, 8), d.lines[4]!, ...d.lines.slice(8)];
    expect(failure(verify(repeated, d.jwks))).toMatchObject({ valid: false, line: 9, problems: expect.stringMatching(/the line is leaf 3, but the run's next leaf is 7: a repeated line, or lines out of order/) });
    // The audit's case: one line removed, another repeated: as many lines as leaves.
    const swapped = without([...d.lines.slice(0, 10), d.lines[10]!, ...d.lines.slice(10)], 5);
    expect(swapped).toHaveLength(d.lines.length);
    const s = verify(swapped, d.jwks);
    expect(s.valid).toBe(false);
    expect(s.log).toMatchObject({ missing: 1, outOfOrder: 1 });
  });

  it('reordered lines are NOT VALID', () => {
    const moved = [...d.lines];
    [moved[3], moved[4]] = [moved[4]!, moved[3]!];
    const s = verify(moved, d.jwks);
    expect(failure(s)).toMatchObject({ valid: false, line: 4, problems: expect.stringMatching(/the line is leaf 3, but the run's next leaf is 2: leaf 2 is not in the file here/) });
    expect(s.log).toMatchObject({ missing: 1, outOfOrder: 1 });
  });

  it('a foreign record is NOT VALID: another deployment, or another log of the same keys', () => {
    // Another deployment's record and proof, in place of leaf 5: neither its signature nor its checkpoint is this one's.
    const s = verify(replaced(d.lines, 6, other.lines[2]!), d.jwks);
    expect(s.valid).toBe(false);
    expect(s.firstFailure?.line).toBe(7);
    expect(s.firstFailure?.problems.map((p) => p.split(':')[0])).toEqual(expect.arrayContaining(['signature', 'inclusion', 'leaf']));
    // Added between two lines, with the other deployment's keys trusted too: its proof is to another checkpoint.
    const both = { keys: [...d.jwks.keys, ...other.jwks.keys] };
    const added = verify([...d.lines.slice(0, 4), other.lines[4]!, ...d.lines.slice(4)], both);
    expect(failure(added)).toMatchObject({ valid: false, line: 5, problems: expect.stringMatching(/leaf: the proof is to another checkpoint than the export's \(ets\.example\/log, 12 leaves\)/) });
  });

  it('a line whose proof is not its record\'s is NOT VALID', () => {
    const a = JSON.parse(d.lines[3]!) as { transparency: unknown };
    const b = JSON.parse(d.lines[4]!) as { record: unknown; transparency: unknown };
    const s = verify(replaced(d.lines, 4, JSON.stringify({ ...b, transparency: a.transparency })), d.jwks);
    expect(failure(s)).toMatchObject({ valid: false, line: 5, problems: expect.stringMatching(/^inclusion: .*does not lead.*; leaf: the line is leaf 2, but the run's next leaf is 3: a repeated line/) });
    // A line without a proof.
    const bare = verify(replaced(d.lines, 4, JSON.stringify({ kind: 'audit-event', record: b.record })), d.jwks);
    expect(failure(bare)).toMatchObject({ valid: false, line: 5, problems: 'leaf: no inclusion proof (every line of an export carries one)' });
  });

  it('a header that does not say where the run starts and ends is NOT VALID', () => {
    // A whole export must hold every leaf of its checkpoint: a shortened run hides the rest.
    const header = JSON.parse(d.lines[0]!) as { export: Record<string, unknown> };
    const shortened = [JSON.stringify({ export: { ...header.export, leaves: { first: 0, last: LEAVES - 3 } } }), ...d.lines.slice(1, LEAVES - 1)];
    expect(failure(verify(shortened, d.jwks))).toMatchObject({ valid: false, line: 1, kind: 'export', problems: expect.stringMatching(/an export of the whole log holds leaves 0\.\.11 of its checkpoint, not 0\.\.9/) });
    // Past the checkpoint's tree.
    const past = [JSON.stringify({ export: { ...header.export, leaves: { first: 0, last: LEAVES } } }), ...d.lines.slice(1)];
    expect(failure(verify(past, d.jwks))).toMatchObject({ valid: false, line: 1, problems: expect.stringMatching(/past the checkpoint's tree of 12 leaves/) });
    // A changed checkpoint, one signed by other keys, no header, an empty file.
    const changed = [JSON.stringify({ export: { ...header.export, checkpoint: d.note.replace('\n12\n', '\n13\n') } }), ...d.lines.slice(1)];
    expect(failure(verify(changed, d.jwks))).toMatchObject({ valid: false, line: 1, problems: expect.stringMatching(/^header\.checkpoint: /) });
    expect(failure(verify(d.lines, other.jwks))).toMatchObject({ valid: false, line: 1, problems: expect.stringMatching(/^header\.checkpoint: .*no signature by a known key/) });
    expect(failure(verify(d.lines.slice(1), d.jwks))).toMatchObject({ valid: false, line: 1, problems: expect.stringMatching(/^header: the first line is not \{"export"/) });
    expect(verify([], d.jwks)).toMatchObject({ valid: false, records: 0 });
  });

  it('a period: its run is complete, and must start and end where its header says', () => {
    const run = d.runOf(3, 8);
    expect(verify(run, d.jwks)).toMatchObject({ valid: true, records: 6, log: { first: 3, last: 8, period: { since: '2026-01-01T00:00:00.000Z' } } });
    // The first or the last leaf of the run left out.
    expect(failure(verify(without(run, 1), d.jwks))).toMatchObject({ valid: false, line: 2, problems: expect.stringMatching(/the line is leaf 4, but the run's next leaf is 3/) });
    expect(failure(verify(without(run, 6), d.jwks))).toMatchObject({ valid: false, kind: 'end of file', problems: expect.stringMatching(/the file ends before leaf 8/) });
    // A leaf of the log beyond the run, added at its end.
    expect(failure(verify([...run, d.lines[10]!], d.jwks))).toMatchObject({ valid: false, line: 8, problems: expect.stringMatching(/the line is leaf 9, outside the export's run \(3\.\.8\)/) });
    // A period that holds no leaf: nothing to verify.
    const empty = [JSON.stringify({ export: { format: EXPORT_FORMAT, checkpoint: d.note, period: { until: '2000-01-01T00:00:00.000Z' }, leaves: null } })];
    expect(verify(empty, d.jwks)).toMatchObject({ valid: false, records: 0, invalid: 0, log: { first: null, last: null } });
    expect(verify([...empty, d.lines[1]!], d.jwks).firstFailure?.problems).toEqual(['leaf: the line is leaf 0, outside the export\'s run (none)']);
  });
});

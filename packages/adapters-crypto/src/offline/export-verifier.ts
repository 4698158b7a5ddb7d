import type { JwksLike } from '../jwk.js';
import { nodeVerifyCrypto } from '../node-verify-crypto.js';
import { equalBytes } from '../transparency/bytes.js';
import { checkSignedCheckpoint, type VerifiedCheckpoint } from '../transparency/log-proofs.js';
import { jwksNoteVerifiers } from '../transparency/node-ed25519.js';
import type { NoteVerifier } from '../transparency/signed-note.js';
import { isObject } from './fields.js';
import { unwrapServedRecord } from './unwrap.js';
import { detectKind, verifyOfflineWith, type OfflineRecordKind } from './verify-offline.js';

/**
 * Verifies an export (`ets export`, JSON Lines) one line at a time, with only the JWKS.
 *
 * An export is a run of the transparency log: its first line, the header, names a signed
 * checkpoint and the run of leaves `first..last` of that checkpoint's tree that the file holds;
 * then one line per leaf, in leaf order, each the signed record with its inclusion proof in that
 * checkpoint. The whole log is the run `0..treeSize-1`; the export of a period is the run from the
 * first to the last leaf of a record stamped in it (with the records of other times whose leaves
 * fall in between). Completeness is part of validity: the file is valid only when every line
 * verifies (`verifyOffline`, with its `inclusion` check) AND its proven leaf indices are exactly
 * `first, first+1, …, last`, so a removed, repeated, reordered or foreign line of any kind breaks
 * it, and so does a run that does not start or end where the header says. The execution chain is
 * checked across the Trust Records as well: each chained execution's `previousChainHash` must be
 * the `chainHash` of the execution before it in the file (leaf order is chain order).
 *
 * What it cannot prove: that the run of a period holds every record stamped in that period.
 * Records are stamped when they are made and become leaves when they commit, a moment later, so
 * times and leaves interleave at the edges of a period; a record of the period may have a leaf
 * outside the run, which only another export (the whole log, or the neighbouring runs) shows.
 *
 * Pure and streaming: it keeps counts, the next expected leaf and the last chain hash, never the
 * records, so a file of any size verifies in constant memory.
 */

/** The format of the header line, `{"export": {"format": …, …}}`. */
export const EXPORT_FORMAT = 'ets-export/2';

/** What the first line of an export says about the rest. */
export interface ExportHeader {
  format: typeof EXPORT_FORMAT;
  /** The signed checkpoint (C2SP signed note) that every line's inclusion proof is to. */
  checkpoint: string;
  /** The period the run was selected by; absent for the whole log. Dates as given, ISO 8601 UTC. */
  period?: { since?: string; until?: string };
  /** The run of leaves the file holds, one line each, in order; null when it holds none. */
  leaves: { first: number; last: number } | null;
}

export interface LineFailure {
  /** 1-based line number (the header is line 1); one past the last line for what the end of the file lacks. */
  line: number;
  kind: string;
  /** The record's id (businessTransactionId, eventId, …) when it has one. */
  id?: string;
  /** `check: detail` for each failed check. */
  problems: string[];
}

export interface ExportSummary {
  /** Record lines (the header not counted). */
  records: number;
  /** Per kind: how many verified and how many did not. */
  kinds: Record<string, { valid: number; invalid: number }>;
  chain: {
    /** Chained executions seen. */
    links: number;
    /** `genesis`: the file starts at the deployment's first execution; otherwise the chainHash it continues from. */
    startsAfter: 'genesis' | string | null;
    /** The chainHash of the last execution (null: no chained execution). */
    head: string | null;
    broken: number;
  };
  /** The log run the header names (null: no valid header), and what the lines showed of it. */
  log: {
    origin: string;
    treeSize: number;
    period?: { since?: string; until?: string };
    first: number | null;
    last: number | null;
    /** Leaves of the run no line holds. */
    missing: number;
    /** Lines whose leaf came before the one expected there: repeated, or out of order. */
    outOfOrder: number;
    /** Lines without a verified inclusion proof in the header's checkpoint. */
    unproven: number;
  } | null;
  /** Lines that failed, the header and the end of the file included. */
  invalid: number;
  firstFailure?: LineFailure;
  valid: boolean;
}

const ID_FIELDS = ['businessTransactionId', 'eventId', 'verificationId', 'receiptId', 'overrideId', 'executionId', 'manifestHash'] as const;

interface Run {
  checkpoint: VerifiedCheckpoint;
  note: string;
  period?: { since?: string; until?: string };
  first: number | null;
  last: number | null;
}

/**
 * What one record line of an export shows on its own, without the lines before it: the part of
 * the verification that can run on any thread (parsing, signatures, hashes, the inclusion proof),
 * as plain data an {@link ExportVerifier} takes in file order (`addChecked`). Structured-clone safe.
 */
export type CheckedLine =
  | { unreadable: true; problems: string[] }
  | {
      unreadable?: false;
      /** The kind the record is (detected), not the one the line claims. */
      kind: OfflineRecordKind;
      id?: string;
      /** Its own failed checks, `check: detail`. */
      problems: string[];
      /** Its inclusion proof's leaf and checkpoint; null when it carries none. */
      proof: { leafIndex: number; checkpoint: unknown } | null;
      inclusionOk: boolean;
      /** Per execution of a Trust Record: its chain fields, or null when it carries none. */
      chain: ChainFields;
    };

type ChainFields = ({ previousChainHash: unknown; chainHash: unknown } | null)[];

/** Checks export lines one at a time, each on its own (see {@link CheckedLine}); one per thread. */
export class ExportLineChecker {
  private readonly notes: readonly NoteVerifier[];

  constructor(private readonly jwks: JwksLike) {
    this.notes = jwksNoteVerifiers(jwks).map(rememberingLastAnswer);
  }

  check(text: string): CheckedLine {
    if (text.trim() === '') return { unreadable: true, problems: ['line: empty'] };
    let value: unknown;
    try {
      value = JSON.parse(text) as unknown;
    } catch {
      return { unreadable: true, problems: ['line: not JSON'] };
    }
    // A record is a signed object, or a confirmation proof: a compact JWS, a JSON string.
    if (!isObject(value) || !(isObject(value.record) || typeof value.record === 'string')) {
      return { unreadable: true, problems: ['line: not {"kind": …, "record": {…}, "transparency": {…}}'] };
    }
    const { record, transparency } = unwrapServedRecord({ record: value.record, transparency: value.transparency });
    const detected: OfflineRecordKind = detectKind(record);
    const kind = typeof value.kind === 'string' ? value.kind : 'unknown';
    const problems: string[] = [];
    if (kind !== detected) problems.push(`kind: the line says ${JSON.stringify(value.kind)}, the record is ${detected}`);
    const report = verifyOfflineWith(nodeVerifyCrypto, record, this.jwks, { transparency, notes: this.notes });
    for (const c of report.checks) if (!c.ok) problems.push(`${c.name}: ${c.detail ?? 'failed'}`);
    const id = idOf(record);
    return {
      kind: detected,
      ...(id !== undefined ? { id } : {}),
      problems,
      proof: isObject(transparency) && isCount(transparency.leafIndex) ? { leafIndex: transparency.leafIndex, checkpoint: transparency.checkpoint } : null,
      inclusionOk: report.checks.find((c) => c.name === 'inclusion')?.ok === true,
      chain: detected === 'execution-trust-record' ? chainFields(record) : [],
    };
  }
}

function chainFields(record: unknown): ChainFields {
  const executions = isObject(record) && Array.isArray(record.executions) ? (record.executions as unknown[]) : [];
  return executions.map((e) => (isObject(e) && ('chainHash' in e || 'previousChainHash' in e) ? { previousChainHash: e.previousChainHash, chainHash: e.chainHash } : null));
}

export class ExportVerifier {
  private lines = 0;
  private invalid = 0;
  private readonly kinds: Record<string, { valid: number; invalid: number }> = {};
  private chainStarted = false;
  private startsAfter: ExportSummary['chain']['startsAfter'] = null;
  private head: string | null = null;
  private links = 0;
  private broken = 0;
  private firstFailure?: LineFailure;
  private run?: Run;
  private headerFailed = false;
  /** The leaf the next line must hold. */
  private expected = 0;
  private readonly counts = { missing: 0, outOfOrder: 0, unproven: 0 };
  private ended?: ExportSummary;
  private readonly notes: readonly NoteVerifier[];
  private checker?: ExportLineChecker;

  constructor(private readonly jwks: JwksLike) {
    this.notes = jwksNoteVerifiers(jwks).map(rememberingLastAnswer);
  }

  /** Checks the next line (its text); returns its failure, if any. */
  addLine(text: string): LineFailure | undefined {
    if (this.lines === 0) {
      this.lines++;
      return this.header(text);
    }
    return this.addChecked((this.checker ??= new ExportLineChecker(this.jwks)).check(text));
  }

  /**
   * Takes the next record line as an {@link ExportLineChecker} checked it (on this thread or
   * another, lines in file order): what depends on the lines before it (the line's place in the run,
   * its chain link, the tallies) is done here. The header (line 1) goes to `addLine`.
   */
  addChecked(checked: CheckedLine): LineFailure | undefined {
    const line = ++this.lines;
    if (line === 1) return this.headerFailure(['header: the first line is the header, not a record']);
    if (checked.unreadable) return this.fail({ line, kind: 'unknown', problems: checked.problems });
    const problems = [...checked.problems];
    problems.push(...this.place(checked.proof, checked.inclusionOk));
    if (checked.kind === 'execution-trust-record') problems.push(...this.link(checked.chain));

    const tally = (this.kinds[checked.kind] ??= { valid: 0, invalid: 0 });
    if (problems.length === 0) {
      tally.valid++;
      return undefined;
    }
    tally.invalid++;
    return this.fail({ line, kind: checked.kind, ...(checked.id !== undefined ? { id: checked.id } : {}), problems }, false);
  }

  /** Ends the file: what its end lacks is a failure too. Call once, after the last line. */
  summary(): ExportSummary {
    if (this.ended) return this.ended;
    const run = this.run;
    if (this.lines === 0) this.fail({ line: 1, kind: 'export', problems: ['file: empty (an export starts with its header line)'] });
    else if (run && run.last !== null && this.expected <= run.last) {
      const from = this.expected;
      this.counts.missing += run.last - from + 1;
      this.fail({
        line: this.lines + 1,
        kind: 'end of file',
        problems: [`leaf: the file ends before leaf ${from}, the export's run ends at leaf ${run.last}: ${span(from, run.last)} not in the file (removed or left out)`],
      });
    }
    const records = Math.max(0, this.lines - 1);
    this.ended = {
      records,
      kinds: this.kinds,
      chain: { links: this.links, startsAfter: this.startsAfter, head: this.head, broken: this.broken },
      log: run
        ? { origin: run.checkpoint.origin, treeSize: run.checkpoint.treeSize, ...(run.period ? { period: run.period } : {}), first: run.first, last: run.last, ...this.counts }
        : null,
      invalid: this.invalid,
      ...(this.firstFailure ? { firstFailure: this.firstFailure } : {}),
      valid: this.invalid === 0 && !this.headerFailed && records > 0,
    };
    return this.ended;
  }

  /** Line 1: the checkpoint (verified with the JWKS) and the run it announces. */
  private header(text: string): LineFailure | undefined {
    const problems: string[] = [];
    let value: unknown;
    try {
      value = JSON.parse(text) as unknown;
    } catch {
      value = undefined;
    }
    const h = isObject(value) && isObject(value.export) ? value.export : undefined;
    if (!h || h.format !== EXPORT_FORMAT) {
      problems.push(`header: the first line is not {"export": {"format": "${EXPORT_FORMAT}", …}} (an export of another version, or not an export)`);
      return this.headerFailure(problems);
    }
    const opened = checkSignedCheckpoint(h.checkpoint, this.notes, 'header.checkpoint');
    if ('error' in opened) return this.headerFailure([opened.error]);
    const checkpoint = opened.checkpoint;
    const period = isObject(h.period) ? { ...(typeof h.period.since === 'string' ? { since: h.period.since } : {}), ...(typeof h.period.until === 'string' ? { until: h.period.until } : {}) } : undefined;
    if (h.period !== undefined && !period) problems.push('header.period: not an object');
    let first: number | null = null;
    let last: number | null = null;
    if (h.leaves !== null) {
      const l = isObject(h.leaves) ? h.leaves : {};
      if (!isCount(l.first) || !isCount(l.last) || l.first > l.last) problems.push('header.leaves: not {"first": n, "last": m} with n ≤ m, nor null');
      else if (l.last >= checkpoint.treeSize) problems.push(`header.leaves: the run ends at leaf ${l.last}, past the checkpoint's tree of ${checkpoint.treeSize} leaves`);
      else [first, last] = [l.first, l.last];
    }
    // The whole log is every leaf of the checkpoint's tree: a header saying otherwise hides some.
    if (!period && problems.length === 0 && checkpoint.treeSize > 0 && (first !== 0 || last !== checkpoint.treeSize - 1)) {
      problems.push(`header.leaves: an export of the whole log holds leaves 0..${checkpoint.treeSize - 1} of its checkpoint, not ${first === null ? 'none' : `${first}..${last}`}`);
    }
    this.run = { checkpoint, note: h.checkpoint as string, ...(period ? { period } : {}), first, last };
    this.expected = first ?? 0;
    return problems.length > 0 ? this.headerFailure(problems) : undefined;
  }

  private headerFailure(problems: string[]): LineFailure {
    this.headerFailed = true;
    return this.fail({ line: 1, kind: 'export', problems });
  }

  /** The line's place in the run: a verified proof in the header's checkpoint, of the leaf expected next. */
  private place(proof: { leafIndex: number; checkpoint: unknown } | null, verified: boolean): string[] {
    const run = this.run;
    if (!run) return [];
    if (!proof) {
      this.counts.unproven++;
      return ['leaf: no inclusion proof (every line of an export carries one)'];
    }
    const problems: string[] = [];
    if (!verified) this.counts.unproven++;
    if (proof.checkpoint !== run.note) {
      problems.push(`leaf: the proof is to another checkpoint than the export's (${run.checkpoint.origin}, ${run.checkpoint.treeSize} leaves): a record of another log or export`);
    }
    const index = proof.leafIndex;
    if (run.last === null || index > run.last) {
      problems.push(`leaf: the line is leaf ${index}, outside the export's run (${run.last === null ? 'none' : `${run.first}..${run.last}`})`);
    } else if (index > this.expected) {
      problems.push(`leaf: the line is leaf ${index}, but the run's next leaf is ${this.expected}: ${span(this.expected, index - 1)} not in the file here (removed, left out or moved)`);
      this.counts.missing += index - this.expected;
      this.expected = index + 1;
    } else if (index < this.expected) {
      problems.push(`leaf: the line is leaf ${index}, but the run's next leaf is ${this.expected}: a repeated line, or lines out of order`);
      this.counts.outOfOrder++;
    } else {
      this.expected++;
    }
    return problems;
  }

  /** The links of this record's executions to the one before them in the file. */
  private link(executions: ChainFields): string[] {
    const problems: string[] = [];
    executions.forEach((e, i) => {
      if (!e) {
        if (this.chainStarted) problems.push(`chain: executions[${i}] carries no chain fields after a chained execution`);
        return;
      }
      const previous = e.previousChainHash;
      if (!this.chainStarted) {
        this.chainStarted = true;
        this.startsAfter = previous === null ? 'genesis' : typeof previous === 'string' ? previous : null;
      } else if (previous !== this.head) {
        this.broken++;
        problems.push(
          previous === null
            ? `chain: executions[${i}] starts a second chain (previousChainHash null): the chain forks`
            : `chain: executions[${i}].previousChainHash ${short(previous)} is not the chainHash ${short(this.head)} of the execution before it: a record is missing or out of order here, or the chain forks`,
        );
      }
      this.links++;
      this.head = typeof e.chainHash === 'string' ? e.chainHash : null;
    });
    return problems;
  }

  private fail(failure: LineFailure, tally = true): LineFailure {
    this.invalid++;
    if (tally && failure.line > 1 && failure.kind !== 'end of file') (this.kinds[failure.kind] ??= { valid: 0, invalid: 0 }).invalid++;
    this.firstFailure ??= failure;
    return failure;
  }
}

/**
 * Every line's proof is to the header's checkpoint, so each key remembers its last answer: that
 * checkpoint's signature is checked once, not once a line. (The same key, message and signature
 * always give the same answer.)
 */
function rememberingLastAnswer(verifier: NoteVerifier): NoteVerifier {
  let last: { message: Uint8Array; signature: Uint8Array; ok: boolean } | undefined;
  return {
    keyName: verifier.keyName,
    keyId: verifier.keyId,
    verify(message, signature) {
      if (last && equalBytes(last.message, message) && equalBytes(last.signature, signature)) return last.ok;
      const ok = verifier.verify(message, signature);
      last = { message: Uint8Array.from(message), signature: Uint8Array.from(signature), ok };
      return ok;
    },
  };
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const span = (from: number, to: number): string => (from === to ? `leaf ${from} is` : `leaves ${from}..${to} (${to - from + 1}) are`);

function idOf(record: unknown): string | undefined {
  if (!isObject(record)) return undefined;
  for (const f of ID_FIELDS) if (typeof record[f] === 'string') return record[f];
  return undefined;
}

const short = (v: unknown): string => (typeof v === 'string' ? `${v.slice(0, 12)}…` : String(v));

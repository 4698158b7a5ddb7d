import { createReadStream, openSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { ExportVerifier, unwrapServedRecord, verifyOffline, type ExportSummary, type JwksLike, type LineFailure, type OfflineReport } from '@ets/adapters-crypto';
import { loadSettings } from '../config/settings.js';
import { CliError, codeOrMessage } from './errors.js';
import { usageOf } from './usage.js';
import { loadJwks } from './jwks.js';
import { readStdin } from './read-stdin.js';
import { feedExport } from './parallel-export-check.js';

const USAGE = usageOf('verify');

/**
 * `ets verify FILE [--keys JWKS_FILE_OR_URL]` (CONTRACT "Running it"): offline verification of one
 * signed object as the API served it: an Execution Trust Record, Refusal Record, Execution
 * Intent, audit event, Verification, Receipt, ExecutionAttestation, attestation-simple answer,
 * override resolution, signed runtime manifest or confirmation proof (a compact JWS, as a JSON string). The `{intent, status}`
 * of `GET /execution-intents/{id}`, the `{…, trustRecord}` of `POST /execute`, the `proof` of
 * `POST /confirm-execution` and the flat manifest of `GET /runtime/manifest` are unwrapped.
 * `FILE` `-` reads standard input. Transparency log proofs are checked too: a Receipt's
 * `transparency` (its Trust Record is in a signed checkpoint's tree), and a `transparency` member
 * beside the record in a wrapper such as `{ "record": …, "transparency": … }` (the record is).
 *
 * `--keys` is a JWKS file, or an http(s) URL of `/.well-known/jwks.json`. Without it the keys are
 * fetched from the local server, `http://SVC_HOST:SVC_PORT/.well-known/jwks.json`; pass a saved
 * JWKS file to verify with no network at all.
 *
 * Prints the kind and every check; exit 0 only when the object verifies, 1 when it does not, 2
 * for usage and I/O errors (unreadable file, not JSON, keys not reachable).
 */
export async function verifyCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { keys: { type: 'string' }, all: { type: 'boolean' }, threads: { type: 'string' } }, allowPositionals: true, strict: true });
  if (positionals.length !== 1 || positionals[0] === '') throw new CliError(`${positionals.length === 0 ? 'FILE is required. ' : ''}${USAGE}`, 2);
  const file = positionals[0]!;
  if (values.threads !== undefined && !values.all) throw new CliError(`--threads goes with --all. ${USAGE}`, 2);
  if (values.all) {
    const threads = values.threads === undefined ? availableParallelism() : Number(values.threads);
    if (!Number.isSafeInteger(threads) || threads < 1) throw new CliError(`--threads must be a whole number of threads, 1 or more. ${USAGE}`, 2);
    const keysSource = values.keys ?? defaultJwksUrl();
    return verifyExport(file, await loadJwks(keysSource), keysSource, threads);
  }
  const parsed = parseJson(await readInput(file), file === '-' ? 'standard input' : file);
  const { record, from, transparency } = unwrapServedRecord(parsed);

  const keysSource = values.keys ?? defaultJwksUrl();
  const jwks = await loadJwks(keysSource);
  const report = verifyOffline(record, jwks, { transparency });
  const input = file === '-' ? 'standard input' : file;
  // An error answer piped in (`curl … /execute | ets verify -`): say so, rather than list failed checks of a record that is not there.
  if (report.kind === 'unknown' && isObject(parsed) && typeof parsed.error === 'string') {
    throw new CliError(`${input} holds an error answer of the service, not a signed record: ${JSON.stringify(parsed).slice(0, 300)}`, 1);
  }
  const answer = from === 'trustRecord' && isObject(parsed) && typeof parsed.executionStatus === 'string' ? executeAnswer(parsed) : undefined;
  process.stdout.write(formatReport(report, { from, keys: keysSource, answer }));
  if (!report.valid) {
    const names = report.checks.filter((c) => !c.ok).map((c) => c.name);
    throw new CliError(`${file === '-' ? 'the record' : file} does NOT verify (failed: ${names.join(', ')}).`, 1);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What `POST /execute` answered, beside the record it carries: what happened, before what the record proves. */
function executeAnswer(answer: Record<string, unknown>): string {
  const decision = isObject(answer.decision) ? answer.decision : {};
  const why = typeof decision.reason === 'string' ? ` (${decision.reason})` : '';
  return `executionStatus ${String(answer.executionStatus)}, decision ${String(decision.action ?? '-')}${why}`;
}

/** Human-readable report: the kind, then one line per check (`ok` or `FAILED: detail`). */
export function formatReport(report: OfflineReport, about: { from?: string; keys: string; answer?: string }): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = [
    `kind: ${report.kind}${about.from ? ` (the \`${about.from}\` of the response)` : ''}`,
    ...(about.answer ? [`answer: ${about.answer}`] : []),
    `keys: ${about.keys}`,
    ...report.checks.map((c) => `  ${c.name.padEnd(width)}  ${c.ok ? `ok${c.detail ? ` (${c.detail})` : ''}` : `FAILED: ${c.detail ?? 'failed'}`}`),
    report.valid ? 'VALID: every check passed.' : 'NOT VALID.',
  ];
  return lines.join('\n') + '\n';
}

/**
 * `ets verify --all FILE`: an export (`ets export`): its header, every record, that the lines are
 * exactly the run of log leaves the header names, and the execution chain across its Trust
 * Records, streamed (constant memory). Prints a summary and the first failure; exit 0 only when
 * all of it holds. The records are checked on `threads` threads, the order and the chain on this one.
 */
async function verifyExport(file: string, jwks: JwksLike, keys: string, threads: number): Promise<void> {
  let input: NodeJS.ReadableStream;
  try {
    input = file === '-' ? process.stdin : createReadStream('', { fd: openSync(file, 'r') });
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${codeOrMessage(e)}`, 2);
  }
  const verifier = new ExportVerifier(jwks);
  await feedExport(createInterface({ input, crlfDelay: Infinity }), verifier, jwks, threads);
  const summary = verifier.summary();
  process.stdout.write(formatExportSummary(summary, keys));
  if (!summary.valid) {
    const f = summary.firstFailure;
    const name = file === '-' ? 'the export' : file;
    throw new CliError(
      f ? `${name} does NOT verify: ${where(f)}: ${f.problems[0]}` : `${name} holds no record: there is nothing to verify.`,
      1,
    );
  }
}

const where = (f: LineFailure): string => (f.kind === 'end of file' ? 'at the end of the file' : `line ${f.line}${f.kind === 'export' ? ' (the header)' : ` (${f.kind}${f.id ? ` ${f.id}` : ''})`}`);

/** The run of the log, counts per kind, the chain from where to where, what the run lacks, and the first failure. */
export function formatExportSummary(s: ExportSummary, keys: string): string {
  const kinds = Object.entries(s.kinds);
  const width = Math.max(0, ...kinds.map(([k]) => k.length));
  const chain =
    s.chain.links === 0
      ? 'chain: no chained execution'
      : `chain: ${s.chain.links} links, ${s.chain.startsAfter === 'genesis' ? "from the deployment's first execution" : `continuing from ${s.chain.startsAfter ?? '(unreadable)'} (earlier records are not in the file)`}, head ${s.chain.head ?? '(unreadable)'}; ${s.chain.broken === 0 ? 'no break' : `${s.chain.broken} BROKEN link(s)`}`;
  const lines = [`keys: ${keys}`];
  const l = s.log;
  if (l) {
    const period = l.period ? `the period from ${l.period.since ?? 'the beginning'} until ${l.period.until ?? 'the checkpoint'}` : 'the whole log';
    lines.push(`export: ${period}, in the checkpoint of ${l.treeSize} leaves of ${l.origin}`);
  } else {
    lines.push('export: no valid header');
  }
  lines.push(`records: ${s.records}`, ...kinds.map(([k, c]) => `  ${k.padEnd(width)}  ${c.valid} valid${c.invalid ? `, ${c.invalid} NOT valid` : ''}`), chain);
  if (l) {
    const run = l.first === null ? 'no leaf' : `leaves ${l.first}..${l.last}`;
    const faults = [l.missing ? `${l.missing} MISSING` : '', l.outOfOrder ? `${l.outOfOrder} REPEATED or OUT OF ORDER` : '', l.unproven ? `${l.unproven} without a valid proof` : ''].filter(Boolean);
    lines.push(
      faults.length === 0
        ? `log: ${run}, each once and in order${l.period ? ' (the run the period selects: a record of the period logged outside it is beyond what this file can show, see the guide)' : ': the whole log up to its checkpoint'}`
        : `log: ${run}: ${faults.join(', ')}`,
    );
  }
  if (s.firstFailure) {
    const f = s.firstFailure;
    lines.push(`first failure: ${where(f)}:`, ...f.problems.map((p) => `  ${p}`));
  }
  lines.push(
    s.valid
      ? 'VALID: every record verifies, no leaf of the run is missing, repeated or out of order, and the chain is unbroken.'
      : s.records === 0 && s.invalid === 0
        ? 'NOT VALID: the file holds no record.'
        : `NOT VALID: ${s.invalid} failure(s); the first is above.`,
  );
  return lines.join('\n') + '\n';
}

async function readInput(file: string): Promise<string> {
  if (file === '-') return readStdin();
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${codeOrMessage(e)}`, 2);
  }
}

function parseJson(text: string, origin: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new CliError(`${origin} is not JSON: save the record exactly as the API served it.`, 2);
  }
}

/** The local server's JWKS: SVC_HOST and SVC_PORT, a wildcard address read as loopback. */
function defaultJwksUrl(): string {
  const { host, port } = loadSettings();
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' || host === '[::]' ? '::1' : host;
  const hostPart = reachable.includes(':') && !reachable.startsWith('[') ? `[${reachable}]` : reachable;
  return `http://${hostPart}:${port}/.well-known/jwks.json`;
}

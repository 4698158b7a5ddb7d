import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { unwrapServedRecord, verifyOffline, type JwksLike, type OfflineReport } from '@ets/adapters-crypto';
import { loadSettings } from '../config/settings.js';
import { CliError } from './errors.js';
import { readStdin } from './read-stdin.js';

const USAGE = 'Usage: ets verify FILE|- [--keys JWKS_FILE_OR_URL]';
const FETCH_TIMEOUT_MS = 10_000;

/**
 * `ets verify FILE [--keys JWKS_FILE_OR_URL]` (CONTRACT "Running it"): offline verification of one
 * signed object as the API served it: an Execution Trust Record, Refusal Record, Execution
 * Intent, audit event, Verification, Receipt or ExecutionAttestation. The `{intent, status}` of
 * `GET /execution-intents/{id}` and the `{…, trustRecord}` of `POST /execute` are unwrapped.
 * `FILE` `-` reads standard input.
 *
 * `--keys` is a JWKS file, or an http(s) URL of `/.well-known/jwks.json`. Without it the keys are
 * fetched from the local server, `http://SVC_HOST:SVC_PORT/.well-known/jwks.json`; pass a saved
 * JWKS file to verify with no network at all.
 *
 * Prints the kind and every check; exit 0 only when the object verifies, 1 when it does not, 2
 * for usage and I/O errors (unreadable file, not JSON, keys not reachable).
 */
export async function verifyCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { keys: { type: 'string' } }, allowPositionals: true, strict: true });
  if (positionals.length !== 1 || positionals[0] === '') throw new CliError(`${positionals.length === 0 ? 'FILE is required. ' : ''}${USAGE}`, 2);
  const file = positionals[0]!;
  const parsed = parseJson(await readInput(file), file === '-' ? 'standard input' : file);
  const { record, from } = unwrapServedRecord(parsed);

  const keysSource = values.keys ?? defaultJwksUrl();
  const jwks = await loadJwks(keysSource);
  const report = verifyOffline(record, jwks);
  process.stdout.write(formatReport(report, { from, keys: keysSource }));
  if (!report.valid) {
    const names = report.checks.filter((c) => !c.ok).map((c) => c.name);
    throw new CliError(`${file === '-' ? 'the record' : file} does NOT verify (failed: ${names.join(', ')}).`, 1);
  }
}

/** Human-readable report: the kind, then one line per check (`ok` or `FAILED: detail`). */
export function formatReport(report: OfflineReport, about: { from?: string; keys: string }): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = [
    `kind: ${report.kind}${about.from ? ` (the \`${about.from}\` of the response)` : ''}`,
    `keys: ${about.keys}`,
    ...report.checks.map((c) => `  ${c.name.padEnd(width)}  ${c.ok ? `ok${c.detail ? ` (${c.detail})` : ''}` : `FAILED: ${c.detail ?? 'failed'}`}`),
    report.valid ? 'VALID: every check passed.' : 'NOT VALID.',
  ];
  return lines.join('\n') + '\n';
}

async function readInput(file: string): Promise<string> {
  if (file === '-') return readStdin();
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, 2);
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

async function loadJwks(source: string): Promise<JwksLike> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    let url: URL;
    try {
      url = new URL(source);
    } catch {
      throw new CliError(`--keys ${source} is not a valid URL.`, 2);
    }
    // The service's address alone is enough: the JWKS has a well-known path.
    if (url.pathname === '/' || url.pathname === '') url.pathname = '/.well-known/jwks.json';
    let res: Response;
    try {
      res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
      throw new CliError(`cannot fetch the keys from ${url.href} (${cause}). Is the server running? Or pass a saved JWKS file with --keys.`, 2);
    }
    if (res.status !== 200) throw new CliError(`cannot fetch the keys from ${url.href}: HTTP ${res.status}.`, 2);
    text = await res.text();
  } else {
    try {
      text = readFileSync(source, 'utf8');
    } catch (e) {
      throw new CliError(`cannot read the keys file ${source}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, 2);
    }
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    throw new CliError(`the keys from ${source} are not JSON (a JWKS, as served by /.well-known/jwks.json, is expected).`, 2);
  }
  if (typeof jwks !== 'object' || jwks === null || !Array.isArray((jwks as { keys?: unknown }).keys)) {
    throw new CliError(`the keys from ${source} are not a JWKS: expected {"keys": [...]}.`, 2);
  }
  return jwks as JwksLike;
}

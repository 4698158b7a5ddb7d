import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  jwksNoteVerifiers,
  openCheckpoint,
  parseCheckpoint,
  parseHashList,
  parseSignedNote,
  rfc9162,
  toBase64,
  verifyConsistency,
  type Checkpoint,
} from '@ets/adapters-crypto';
import { CliError, codeOrMessage, fetchProblem } from './errors.js';
import { usageOf } from './usage.js';
import { FETCH_TIMEOUT_MS, loadJwks } from './jwks.js';
import { writeFileAtomic } from '../write-file-atomic.js';

const USAGE = usageOf('log monitor');
const MAX_ANSWER_BYTES = 1_000_000;

/** What the state file holds: the last checkpoint this monitor found consistent, as the log signed it. */
interface MonitorState {
  log: string;
  origin: string;
  treeSize: number;
  /** Base64, as in the checkpoint (for people reading the file; `checkpoint` is what counts). */
  rootHash: string;
  checkpoint: string;
  savedAt: string;
}

/** `ets log …`: the transparency log's operator and auditor commands. */
export async function logCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === 'monitor') return monitorCommand(rest);
  throw new CliError(`${sub ? `unknown log command '${sub}'. ` : ''}${USAGE}`, 2);
}

/**
 * `ets log monitor --state FILE [--keys JWKS] URL`: what an auditor or a witness runs on a
 * schedule. Fetches `URL/log/checkpoint`, checks its signature with the JWKS (`--keys`, else
 * `URL/.well-known/jwks.json`), and proves with `URL/log/proof/consistency` that it extends the
 * checkpoint saved in FILE; FILE is replaced only then. The first run has nothing to compare with
 * and trusts the log's checkpoint on first use (it says so).
 *
 * Exit 0: consistent (or first run). 1: the log misbehaved: a fork (a leaf removed, changed or
 * reordered, history rewritten), a rollback, a bad signature, another origin or an invalid proof;
 * both checkpoints are written to FILE.evidence.json. 2: nothing could be checked (usage, the log
 * or the keys unreachable, an unreadable state file).
 */
async function monitorCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { state: { type: 'string' }, keys: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (!values.state || positionals.length !== 1) throw new CliError(`${values.state ? 'URL' : '--state FILE'} is required. ${USAGE}`, 2);
  const file = values.state;
  const base = logBase(positionals[0]!);
  const saved = readState(file);

  const checkpointUrl = new URL('log/checkpoint', base);
  const note = await fetchFromLog(checkpointUrl, 'text/plain', file);
  const keys = values.keys ?? new URL('.well-known/jwks.json', base).href;
  const verifiers = jwksNoteVerifiers(await loadJwks(keys));
  let served: Checkpoint & { signedBy: string[] };
  try {
    served = openCheckpoint(note, verifiers);
  } catch (e) {
    throw new CliError(`BAD CHECKPOINT: the checkpoint served at ${checkpointUrl.href} does not verify with the keys from ${keys}: ${(e as Error).message}. ${file} is unchanged.`, 1);
  }
  const describe = (c: Checkpoint) => `size ${c.treeSize} (root ${toBase64(c.rootHash)})`;

  if (!saved) {
    writeState(file, base, served, note);
    say(
      `first run: ${file} holds no checkpoint yet, so the log is trusted on first use: ${served.origin} at ${describe(served)}, ` +
        `signed by ${served.signedBy.join(', ')}. Saved; every later run proves the log's new checkpoint extends this one.`,
    );
    return;
  }

  const old = saved.parsed;
  const misbehaved = (what: string, proof?: string[]): never => {
    const evidence = `${file}.evidence.json`;
    writeFileSync(evidence, JSON.stringify({ detectedAt: new Date().toISOString(), log: base.href, problem: what, saved: saved.state.checkpoint, served: note, proof }, null, 2) + '\n');
    throw new CliError(`${what} ${file} is unchanged; both signed checkpoints are in ${evidence}.`, 1);
  };
  if (served.origin !== old.origin) {
    misbehaved(`ORIGIN CHANGED: the log now signs checkpoints for ${JSON.stringify(served.origin)}, not ${JSON.stringify(old.origin)} as saved.`);
  }
  if (served.treeSize < old.treeSize) {
    misbehaved(`ROLLBACK: the log serves ${describe(served)}, smaller than ${describe(old)} it showed before (saved ${saved.state.savedAt}).`);
  }
  if (served.treeSize === old.treeSize) {
    if (toBase64(served.rootHash) !== toBase64(old.rootHash)) {
      misbehaved(`FORK: the log serves another tree of the same size: ${describe(served)}, saved ${describe(old)}. Leaves were changed, removed or reordered.`);
    }
    say(`unchanged: ${served.origin} still at ${describe(served)}, as saved ${saved.state.savedAt}.`);
    return;
  }

  let proofText: string[] | undefined;
  let consistent: boolean;
  if (old.treeSize === 0) {
    consistent = toBase64(old.rootHash) === toBase64(rfc9162.emptyRoot); // every tree extends the empty one
  } else {
    const proofUrl = new URL(`log/proof/consistency?from=${old.treeSize}&to=${served.treeSize}`, base);
    const answer = parseJsonAnswer(await fetchFromLog(proofUrl, 'application/json', file));
    const errors: string[] = [];
    const hashes = parseHashList((answer as { hashes?: unknown } | undefined)?.hashes, 'hashes', errors);
    if (!hashes) misbehaved(`INVALID PROOF: ${proofUrl.href} answered no consistency proof (${errors.join('; ') || 'not JSON'}).`);
    proofText = (answer as { hashes: string[] }).hashes;
    consistent = verifyConsistency(old.treeSize, served.treeSize, old.rootHash, served.rootHash, hashes!);
  }
  if (!consistent) {
    misbehaved(
      `FORK: the log's ${describe(served)} does not extend the ${describe(old)} saved ${saved.state.savedAt}: ` +
        'a leaf was removed, changed or reordered, or the history was rewritten.',
      proofText,
    );
  }
  writeState(file, base, served, note);
  say(`consistent: ${served.origin} grew from ${old.treeSize} to ${served.treeSize} leaves, signed by ${served.signedBy.join(', ')}; saved to ${file}.`);
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** The log's base URL, with a trailing slash so that `log/checkpoint` resolves under any path. */
function logBase(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliError(`${text} is not a URL. ${USAGE}`, 2);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`${text} is not an http(s) URL. ${USAGE}`, 2);
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  url.search = '';
  url.hash = '';
  return url;
}

function readState(file: string): { state: MonitorState; parsed: Checkpoint } | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`cannot read the state file ${file}: ${codeOrMessage(e)}`, 2);
  }
  try {
    const state = JSON.parse(text) as MonitorState;
    // The signed note is what counts; the other members are for people reading the file.
    return { state, parsed: parseCheckpoint(parseSignedNote(state.checkpoint).text) };
  } catch {
    throw new CliError(`${file} is not a state file of 'ets log monitor'. Move it away to start again (the log is then trusted on first use).`, 2);
  }
}

function writeState(file: string, base: URL, checkpoint: Checkpoint, note: string): void {
  const state: MonitorState = {
    log: base.href,
    origin: checkpoint.origin,
    treeSize: checkpoint.treeSize,
    rootHash: toBase64(checkpoint.rootHash),
    checkpoint: note,
    savedAt: new Date().toISOString(),
  };
  // Atomically: a crash never leaves half a state file, which would lose the saved head.
  try {
    writeFileAtomic(file, JSON.stringify(state, null, 2) + '\n');
  } catch (e) {
    throw new CliError(`cannot write the state file ${file}: ${codeOrMessage(e)}`, 2);
  }
}

/** The body of a 200 answer, at most MAX_ANSWER_BYTES; anything else means nothing could be checked. */
async function fetchFromLog(url: URL, accept: string, file: string): Promise<string> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept } });
  } catch (e) {
    const cause = fetchProblem(e);
    throw new CliError(`cannot reach the log at ${url.href} (${cause}); nothing was checked, ${file} is unchanged.`, 2);
  }
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new CliError(`the log answered HTTP ${res.status} at ${url.href}; nothing was checked, ${file} is unchanged.`, 2);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += (chunk as Uint8Array).length;
    if (size > MAX_ANSWER_BYTES) throw new CliError(`the log's answer at ${url.href} is larger than ${MAX_ANSWER_BYTES} bytes; ${file} is unchanged.`, 1);
    chunks.push(chunk as Uint8Array);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJsonAnswer(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

import { DomainError, invalid, logLeafOf, type ExecutionStore, type Hasher, type LogCheckpoint, type LogLeaf, type TransparencyLog, type TransparencyProof } from '@ets/domain';
import type { Request } from 'express';
import { readScope } from '../middleware/read-scope.js';
import type { RouteModule } from '../route-table.js';
import { idParam } from './id-param.js';
import { jsonWithTexts, sendJsonText } from './json-text.js';

export interface TransparencyLogRoutesDeps {
  log: TransparencyLog;
  /** The checkpoint publisher: the latest checkpoint, and proofs against one that holds a leaf. */
  publisher: { publish(): Promise<LogCheckpoint>; proofOf(leaf: LogLeaf): Promise<TransparencyProof | undefined> };
  records: Pick<ExecutionStore, 'getTrustRecordText'>;
  hasher: Hasher;
}

export const MAX_LOG_LEAVES = 1000;
const HEX_LEAF = /^[0-9a-fA-F]{64}$/;
const COUNT = /^(0|[1-9][0-9]{0,15})$/;

/** One query parameter, exactly once. */
function param(req: Request, name: string): string {
  const v = req.query[name];
  if (typeof v !== 'string') throw invalid(`${name} is required, once.`);
  return v;
}

/** A whole number in [min, max] without sign or leading zeros. */
function count(req: Request, name: string, min: number, max: number, what: string): number {
  const v = param(req, name);
  const n = COUNT.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw invalid(`${name} must be ${what}.`);
  return n;
}

/**
 * The transparency log (CONTRACT "Transparency log"): the latest signed checkpoint and the proofs
 * that anyone checks against it, public and rate-limited like the other public routes; and a
 * Trust Record with its inclusion proof for its readers.
 */
export const transparencyLogRoutes = (deps: TransparencyLogRoutesDeps): RouteModule => (t) => {
  const treeSize = async () => (await deps.log.treeHead()).treeSize;

  t.get('/log/checkpoint', { auth: 'none', limiter: 'public' }, async (_req, res) => {
    const checkpoint = (await deps.log.latestCheckpoint()) ?? (await deps.publisher.publish());
    res.setHeader('Cache-Control', 'no-cache');
    res.type('text/plain; charset=utf-8').send(checkpoint.note);
  });

  t.get('/log/proof/inclusion', { auth: 'none', limiter: 'public', query: ['leaf', 'size'] }, async (req, res) => {
    const leaf = param(req, 'leaf');
    if (!HEX_LEAF.test(leaf)) throw invalid('leaf must be the hex SHA-256 leaf input (64 hex digits).');
    const size = await treeSize();
    const at = count(req, 'size', 1, Math.max(size, 1), `a tree size from 1 to ${size} (the current tree)`);
    if (size === 0) throw invalid('The log is empty: there is no tree to prove inclusion in.');
    const proof = await deps.log.inclusionProof(leaf.toLowerCase(), at);
    if (!proof) throw new DomainError('not_found', `The leaf is not in the tree of size ${at}.`);
    res.json(proof);
  });

  t.get('/log/proof/consistency', { auth: 'none', limiter: 'public', query: ['from', 'to'] }, async (req, res) => {
    const size = await treeSize();
    if (size === 0) throw invalid('The log is empty: there are no trees to prove consistent.');
    const to = count(req, 'to', 1, size, `a tree size from 1 to ${size} (the current tree)`);
    const from = count(req, 'from', 1, to, `a tree size from 1 to to (${to})`);
    res.json(await deps.log.consistencyProof(from, to));
  });

  t.get('/log/leaves', { auth: 'none', limiter: 'public', query: ['start', 'count'] }, async (req, res) => {
    const start = count(req, 'start', 0, Number.MAX_SAFE_INTEGER, 'a leaf index from 0');
    const n = count(req, 'count', 1, MAX_LOG_LEAVES, `a number of leaves from 1 to ${MAX_LOG_LEAVES}`);
    res.json({ leaves: await deps.log.leaves(start, n) });
  });

  // A whole record is read and hashed, and sent back from its stored text (read-gate.ts).
  t.get('/trust-records/:id/proof', { auth: 'key', heavyRead: true }, async (req, res) => {
    // CONTRACT "Who reads what": through the caller's read scope, like every read of a record.
    const text = await deps.records.getTrustRecordText(idParam(req), readScope(res));
    if (text === undefined) throw new DomainError('not_found', 'Execution Trust Record not found.');
    const transparency = await deps.publisher.proofOf(logLeafOf(deps.hasher, JSON.parse(text) as object));
    if (!transparency) throw new DomainError('not_found', 'The Execution Trust Record is not in the transparency log.');
    sendJsonText(req, res, jsonWithTexts({}, { trustRecord: text, transparency: JSON.stringify(transparency) }));
  });
};

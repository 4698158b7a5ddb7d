import {
  DomainError,
  isVerifiedHuman,
  servedIntentStatus,
  UUID_V1_TO_V5,
  type AuthenticationAudit,
  parseBusinessTransaction,
  type ExecutionOutcome,
  type ExecutionService,
  type ExecutionStore,
  type IntentState,
  type SignatureVerifier,
  type StoredIntent,
  type TransactionSearch,
} from '@ets/domain';
import type { Response } from 'express';
import { callerOf, pendingAuditOf } from '../middleware/authenticate.js';
import { readScope } from '../middleware/read-scope.js';
import type { RouteModule } from '../route-table.js';
import { jsonWithTexts, sendJsonText, streamTextPage } from './json-text.js';
import { PAGE_QUERY, readPaging } from './paging.js';
import { idParam } from './id-param.js';
import { CLAIM_QUERY, readClaimQuery } from './transaction-query.js';

export interface ExecutionRoutesDeps {
  service: ExecutionService;
  /** Stores a request's authentication event when the pipeline did not (see RouteOptions.auditInPipeline). */
  audit: Pick<AuthenticationAudit, 'settle'>;
  store: ExecutionStore;
  /** `GET /transactions` with filters (the console's records page). */
  search: TransactionSearch;
  verifier: SignatureVerifier;
  clock: { now(): Date };
}

const isRecord = (v: unknown, recordType: string): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && (v as Record<string, unknown>).recordType === recordType && typeof (v as Record<string, unknown>).signature === 'string';

const INTENT_STATES: IntentState[] = ['PREPARED', 'RELEASED', 'FINALIZED', 'ERRORED', 'RESOLVED'];
const INTENT_NOT_FOUND = () => new DomainError('not_found', 'Execution Intent not found.', 'EXECUTION_INTENT_NOT_FOUND');

/** `state=A,B` of `GET /execution-intents`; default the states that need reconciliation. */
function readStates(query: Record<string, unknown>): IntentState[] {
  const raw = query.state === undefined ? 'PREPARED,ERRORED' : query.state;
  const states = typeof raw === 'string' ? raw.split(',').map((s) => s.trim().toUpperCase()) : [];
  if (states.length === 0 || states.some((s) => !INTENT_STATES.includes(s as IntentState))) {
    throw new DomainError('invalid', `state must be a comma-separated list of ${INTENT_STATES.join(', ')}.`);
  }
  return [...new Set(states)] as IntentState[];
}

/** Profile T execution routes (spec 4.1, 2.4, 7). */
export const executionRoutes = (deps: ExecutionRoutesDeps): RouteModule => (t) => {
  /**
   * One request through the pipeline (`execute` or `record`): the Business Transaction built from
   * the body, the request's authentication event stored (with its first record, or here) before
   * anything is answered.
   */
  const run = async (res: Response, body: unknown, phase: 'execute' | 'record'): Promise<AnswerableOutcome> => {
    const pending = pendingAuditOf(res);
    let outcome: ExecutionOutcome;
    try {
      const request = { caller: callerOf(res), tx: parseBusinessTransaction(body), audit: pending };
      outcome = await (phase === 'execute' ? deps.service.execute(request) : deps.service.record(request));
    } finally {
      if (pending) await deps.audit.settle(pending);
    }
    return answerable(res, outcome);
  };

  t.post('/execute', { auth: 'key', limiter: 'execute', auditInPipeline: true }, async (req, res) => {
    sendExecution(res, await run(res, req.body, 'execute'));
  });

  t.post('/transactions', { auth: 'key', auditInPipeline: true }, async (req, res) => {
    const outcome = await run(res, req.body, 'record');
    res.status(201).json({
      businessTransactionId: outcome.record.businessTransactionId,
      status: 'RECORDED',
      decision: outcome.record.decision,
      trustRecord: outcome.record,
    });
  });

  t.get('/transactions', { auth: 'key', query: [...PAGE_QUERY, ...CLAIM_QUERY] }, async (req, res) => {
    const { page, pageSize } = readPaging(req.query);
    res.json(await deps.search.findClaims(readClaimQuery(req.query), readScope(res), page, pageSize));
  });

  t.get('/transactions/:id', { auth: 'key', heavyRead: true }, async (req, res) => {
    const id = idParam(req);
    const scope = readScope(res);
    const claim = await deps.store.getClaim(id, scope);
    if (!claim) throw new DomainError('not_found', 'Business Transaction not found.');
    const [trustRecord, refusal] = await Promise.all([
      deps.store.getTrustRecordText(id, scope),
      claim.outcome === 'REFUSED' ? deps.store.getRefusal(id, scope) : undefined,
    ]);
    sendJsonText(req, res, jsonWithTexts(claim, { trustRecord, refusal: refusal && JSON.stringify(refusal) }));
  });

  // Chain order, oldest first; streamed from the stored texts (see json-text.ts, read-gate.ts).
  t.get('/trust-records', { auth: 'key', heavyRead: true, query: PAGE_QUERY }, async (req, res) => {
    const { page, pageSize } = readPaging(req.query);
    await streamTextPage(req, res, await deps.store.listTrustRecordTexts(readScope(res), page, pageSize));
  });

  t.get('/trust-records/:id', { auth: 'key', heavyRead: true }, async (req, res) => {
    const text = await deps.store.getTrustRecordText(idParam(req), readScope(res));
    if (text === undefined) throw new DomainError('not_found', 'Execution Trust Record not found.');
    sendJsonText(req, res, text);
  });

  t.get('/refusal/:id', { auth: 'key' }, async (req, res) => {
    const refusal = await deps.store.getRefusal(idParam(req), readScope(res));
    if (!refusal) throw new DomainError('not_found', 'Refusal Record not found.');
    res.json(refusal);
  });

  t.post('/refusal/verify', { auth: 'none', limiter: 'public' }, (req, res) => {
    if (!isRecord(req.body, 'refusal-record')) throw new DomainError('invalid', 'Body must be a Refusal Record as served by GET /refusal/{businessTransactionId}.');
    res.json(verification(deps.verifier, req.body));
  });

  t.get('/execution-intents', { auth: 'key', query: ['state', ...PAGE_QUERY] }, async (req, res) => {
    const states = readStates(req.query);
    const { page, pageSize } = readPaging(req.query);
    const listed = await deps.store.listIntents(states, readScope(res), page, pageSize);
    const now = deps.clock.now();
    res.json({ ...listed, items: listed.items.map((i) => served(i, now)) });
  });

  t.get('/execution-intents/:id', { auth: 'key' }, async (req, res) => {
    const found = await deps.store.getIntent(idParam(req), readScope(res));
    if (!found) throw INTENT_NOT_FOUND();
    res.json(served(found, deps.clock.now()));
  });

  t.post('/execution-intents/verify', { auth: 'none', limiter: 'public' }, (req, res) => {
    if (!isRecord(req.body, 'execution-intent')) throw new DomainError('invalid', 'Body must be an Execution Intent as served in `intent` by GET /execution-intents/{businessTransactionId}.');
    res.json(verification(deps.verifier, req.body));
  });

  t.post('/execution-intents/:id/resolve', { auth: 'key' }, async (req, res) => {
    const caller = callerOf(res);
    if (!isVerifiedHuman(caller)) {
      throw new DomainError('forbidden', 'Only a verified human (a USER key) may resolve an Execution Intent.', 'NON_HUMAN_CALLER_DENIED');
    }
    const id = idParam(req);
    if (!UUID_V1_TO_V5.test(id)) throw INTENT_NOT_FOUND();
    const body = req.body as { found?: unknown; note?: unknown } | undefined;
    if (
      typeof body !== 'object' || body === null ||
      (body.found !== 'EXECUTED' && body.found !== 'NOT_EXECUTED') ||
      typeof body.note !== 'string' || body.note.trim() === '' || body.note.length > 2000
    ) {
      throw new DomainError(
        'invalid',
        'Body must be {"found": "EXECUTED" | "NOT_EXECUTED", "note": "<what was found at the connector, at most 2000 characters>"}.',
        'EXECUTION_INTENT_RESOLUTION_INVALID',
      );
    }
    const now = deps.clock.now();
    const at = now.toISOString();
    const done = await deps.store.resolve(id, { found: body.found, note: body.note, resolvedBy: caller.callerId, resolvedAt: at }, at);
    switch (done.outcome) {
      case 'not-found':
        throw INTENT_NOT_FOUND();
      case 'not-resolvable':
        throw new DomainError('conflict', `An Execution Intent in state ${done.state} cannot be resolved; only PREPARED or ERRORED can.`, 'EXECUTION_INTENT_NOT_RESOLVABLE');
      case 'in-flight':
        throw new DomainError(
          'conflict',
          `The request of this Execution Intent is still in flight: it may still release the action. It can be resolved once the request has ended, at the latest after ${done.until}.`,
          'EXECUTION_INTENT_NOT_RESOLVABLE',
        );
    }
    res.json(served((await deps.store.getIntent(id, readScope(res)))!, now));
  });
};

/** The outcomes answered with a success status; the others are errors. */
export type AnswerableOutcome = Exclude<ExecutionOutcome, { kind: 'refused' | 'failed' }>;

/**
 * The REST door's reading of an outcome: a refusal is 403 POLICY_DENIED with a `Link` to its signed
 * record (the body stays the spec's envelope), a failure after the intent was stored is its error.
 */
export function answerable(res: Response, outcome: ExecutionOutcome): AnswerableOutcome {
  if (outcome.kind === 'refused') {
    res.setHeader('Link', `</refusal/${outcome.refusal.businessTransactionId}>; rel="related"`);
    throw new DomainError('forbidden', `Execution rejected: ${outcome.refusal.reason}`, 'POLICY_DENIED');
  }
  if (outcome.kind === 'failed') throw outcome.error;
  return outcome;
}

/** What `POST /execute` answers: 200 EXECUTED with the result, or 202 PENDING_OVERRIDE for a held transaction. */
export function sendExecution(res: Response, outcome: AnswerableOutcome): void {
  if (outcome.kind === 'held') {
    res.status(202).json({
      businessTransactionId: outcome.record.businessTransactionId,
      executionStatus: 'PENDING_OVERRIDE',
      decision: outcome.record.decision,
      expiresAt: outcome.expiresAt,
      trustRecord: outcome.record,
    });
    return;
  }
  res.status(200).json({
    businessTransactionId: outcome.record.businessTransactionId,
    executionStatus: 'EXECUTED',
    decision: outcome.record.decision,
    result: outcome.kind === 'executed' ? outcome.result : null,
    trustRecord: outcome.record,
  });
}

/** An intent as served: its status says whether its request is still in flight. */
const served = (found: StoredIntent, now: Date): StoredIntent => ({ intent: found.intent, status: servedIntentStatus(found.status, now) });

function verification(verifier: SignatureVerifier, record: Record<string, unknown>) {
  const r = verifier.verify(record);
  return { valid: r.valid, keyId: r.keyId ?? (typeof record.keyId === 'string' ? record.keyId : undefined), errors: r.errors };
}

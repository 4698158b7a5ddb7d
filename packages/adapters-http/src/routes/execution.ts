import {
  DomainError,
  isVerifiedHuman,
  servedIntentStatus,
  UUID_V1_TO_V5,
  type AuthenticationAudit,
  type ExecutionService,
  type ExecutionStore,
  type IntentState,
  type SignatureVerifier,
  type StoredIntent,
} from '@ets/domain';
import type { Response } from 'express';
import { callerOf, pendingAuditOf } from '../middleware/authenticate.js';
import { readScope } from '../middleware/read-scope.js';
import type { RouteModule } from '../route-table.js';
import { jsonWithTexts, sendJsonText, streamTextPage } from './json-text.js';
import { PAGE_QUERY, readPaging } from './paging.js';
import { idParam } from './id-param.js';

export interface ExecutionRoutesDeps {
  service: ExecutionService;
  /** Stores a request's authentication event when the pipeline did not (see RouteOptions.auditInPipeline). */
  audit: Pick<AuthenticationAudit, 'settle'>;
  store: ExecutionStore;
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
  /** The pipeline's run, its authentication event stored (with its first record, or here) before anything is answered. */
  const run = async (res: Response, body: unknown, mode: 'release' | 'record') => {
    const pending = pendingAuditOf(res);
    try {
      return await deps.service.run(callerOf(res), body, mode, pending);
    } finally {
      if (pending) await deps.audit.settle(pending);
    }
  };

  t.post('/execute', { auth: 'key', limiter: 'execute', auditInPipeline: true }, async (req, res) => {
    const outcome = await run(res, req.body, 'release');
    if (outcome.kind === 'pending-override') {
      res.status(202).json({
        businessTransactionId: outcome.record.businessTransactionId,
        executionStatus: 'PENDING_OVERRIDE',
        decision: outcome.record.decision,
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

  t.get('/transactions', { auth: 'key', query: PAGE_QUERY }, async (req, res) => {
    const { page, pageSize } = readPaging(req.query);
    res.json(await deps.store.listClaims(readScope(res), page, pageSize));
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

/** An intent as served: its status says whether its request is still in flight. */
const served = (found: StoredIntent, now: Date): StoredIntent => ({ intent: found.intent, status: servedIntentStatus(found.status, now) });

function verification(verifier: SignatureVerifier, record: Record<string, unknown>) {
  const r = verifier.verify(record);
  return { valid: r.valid, keyId: r.keyId ?? (typeof record.keyId === 'string' ? record.keyId : undefined), errors: r.errors };
}

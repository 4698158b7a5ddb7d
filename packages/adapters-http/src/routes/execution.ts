import {
  DomainError,
  isVerifiedHuman,
  UUID_V1_TO_V5,
  type ExecutionService,
  type ExecutionStore,
  type IntentResolution,
  type IntentState,
  type SignatureVerifier,
} from '@ets/domain';
import type { Request } from 'express';
import { callerOf } from '../middleware/authenticate.js';
import type { RouteModule } from '../route-table.js';
import { readPaging } from './paging.js';

export interface ExecutionRoutesDeps {
  service: ExecutionService;
  store: ExecutionStore;
  verifier: SignatureVerifier;
  clock: { now(): Date };
}

const idParam = (req: Request): string => String(req.params.id).toLowerCase();
const isRecord = (v: unknown, recordType: string): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && (v as Record<string, unknown>).recordType === recordType && typeof (v as Record<string, unknown>).signature === 'string';

const INTENT_STATES: IntentState[] = ['PREPARED', 'RELEASED', 'FINALIZED', 'ERRORED', 'RESOLVED'];

/** Profile T execution routes (spec 4.1, 2.4, 7). */
export const executionRoutes = (deps: ExecutionRoutesDeps): RouteModule => (t) => {
  t.post('/execute', { auth: 'key', limiter: 'execute' }, async (req, res) => {
    const outcome = await deps.service.run(callerOf(res), req.body, 'release');
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

  t.post('/transactions', { auth: 'key' }, async (req, res) => {
    const outcome = await deps.service.run(callerOf(res), req.body, 'record');
    res.status(201).json({
      businessTransactionId: outcome.record.businessTransactionId,
      status: 'RECORDED',
      decision: outcome.record.decision,
      trustRecord: outcome.record,
    });
  });

  t.get('/transactions', { auth: 'key' }, async (req, res) => {
    const { page, pageSize } = readPaging(req.query);
    res.json(await deps.store.listClaims(page, pageSize));
  });

  t.get('/transactions/:id', { auth: 'key' }, async (req, res) => {
    const id = idParam(req);
    const claim = await deps.store.getClaim(id);
    if (!claim) throw new DomainError('not_found', 'Business Transaction not found.');
    const [trustRecord, refusal] = await Promise.all([deps.store.getTrustRecord(id), claim.outcome === 'REFUSED' ? deps.store.getRefusal(id) : undefined]);
    res.json({ ...claim, trustRecord: trustRecord ?? null, refusal: refusal ?? null });
  });

  t.get('/trust-records', { auth: 'key' }, async (req, res) => {
    const { page, pageSize } = readPaging(req.query);
    res.json(await deps.store.listTrustRecords(page, pageSize));
  });

  t.get('/trust-records/:id', { auth: 'key' }, async (req, res) => {
    const record = await deps.store.getTrustRecord(idParam(req));
    if (!record) throw new DomainError('not_found', 'Execution Trust Record not found.');
    res.json(record);
  });

  t.get('/refusal/:id', { auth: 'key' }, async (req, res) => {
    const refusal = await deps.store.getRefusal(idParam(req));
    if (!refusal) throw new DomainError('not_found', 'Refusal Record not found.');
    res.json(refusal);
  });

  t.post('/refusal/verify', { auth: 'none', limiter: 'public' }, (req, res) => {
    if (!isRecord(req.body, 'refusal-record')) throw new DomainError('invalid', 'Body must be a Refusal Record as served by GET /refusal/{businessTransactionId}.');
    res.json(verification(deps.verifier, req.body));
  });

  t.get('/execution-intents', { auth: 'key' }, async (req, res) => {
    const raw = typeof req.query.state === 'string' ? req.query.state : 'PREPARED,ERRORED';
    const states = raw.split(',').map((s) => s.trim().toUpperCase());
    if (states.some((s) => !INTENT_STATES.includes(s as IntentState))) {
      throw new DomainError('invalid', `state must be a comma-separated list of ${INTENT_STATES.join(', ')}.`);
    }
    res.json({ intents: await deps.store.listIntents(states as IntentState[], 500) });
  });

  t.get('/execution-intents/:id', { auth: 'key' }, async (req, res) => {
    const found = await deps.store.getIntent(idParam(req));
    if (!found) throw new DomainError('not_found', 'Execution Intent not found.', 'EXECUTION_INTENT_NOT_FOUND');
    res.json(found);
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
    if (!UUID_V1_TO_V5.test(id)) throw new DomainError('not_found', 'Execution Intent not found.', 'EXECUTION_INTENT_NOT_FOUND');
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
    const current = await deps.store.getIntent(id);
    if (!current) throw new DomainError('not_found', 'Execution Intent not found.', 'EXECUTION_INTENT_NOT_FOUND');
    const previousState = current.status.state;
    if (previousState !== 'PREPARED' && previousState !== 'ERRORED') {
      throw new DomainError('conflict', `An Execution Intent in state ${previousState} cannot be resolved; only PREPARED or ERRORED can.`, 'EXECUTION_INTENT_NOT_RESOLVABLE');
    }
    const at = deps.clock.now().toISOString();
    const resolution: IntentResolution = { found: body.found, note: body.note, resolvedBy: caller.callerId, resolvedAt: at, previousState };
    if (!(await deps.store.resolve(id, resolution, at))) {
      throw new DomainError('conflict', 'The Execution Intent changed state meanwhile and cannot be resolved.', 'EXECUTION_INTENT_NOT_RESOLVABLE');
    }
    res.json(await deps.store.getIntent(id));
  });
};

function verification(verifier: SignatureVerifier, record: Record<string, unknown>) {
  const r = verifier.verify(record);
  return { valid: r.valid, keyId: r.keyId ?? (typeof record.keyId === 'string' ? record.keyId : undefined), errors: r.errors };
}

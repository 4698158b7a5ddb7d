import { DomainError, readHeldStatus, type HeldTransactions } from '@ets/domain';
import { callerOf } from '../middleware/authenticate.js';
import { readScope } from '../middleware/read-scope.js';
import type { RouteModule } from '../route-table.js';
import { answerable, sendExecution } from './execution.js';
import { idParam } from './id-param.js';
import { PAGE_QUERY, readPaging } from './paging.js';

/**
 * Held transactions (CONTRACT "Held transactions"): a `requires_override` decision answered
 * `202 PENDING_OVERRIDE` waits here for a human. Approve releases it once and answers what
 * `POST /execute` would have answered; reject refuses it with a signed Refusal Record.
 */
export const overrideRoutes = (deps: { held: HeldTransactions }): RouteModule => (t) => {
  t.get('/overrides', { auth: 'key', query: ['status', ...PAGE_QUERY] }, async (req, res) => {
    const status = readHeldStatus(req.query.status);
    const { page, pageSize } = readPaging(req.query);
    res.json(await deps.held.list(status, readScope(res), page, pageSize));
  });

  t.get('/overrides/:id', { auth: 'key' }, async (req, res) => {
    res.json(await deps.held.get(idParam(req), readScope(res)));
  });

  t.post('/overrides/:id/approve', { auth: 'key', limiter: 'execute' }, async (req, res) => {
    const outcome = answerable(res, await deps.held.approve(callerOf(res), idParam(req), req.body));
    if (outcome.kind !== 'executed') throw new DomainError('internal', `A held transaction's release ended ${outcome.kind}.`);
    sendExecution(res, outcome);
  });

  t.post('/overrides/:id/reject', { auth: 'key' }, async (req, res) => {
    const view = await deps.held.reject(callerOf(res), idParam(req), req.body);
    res.setHeader('Link', `</refusal/${view.businessTransactionId}>; rel="related"`);
    res.json(view);
  });
};

import { type PolicyGovernance, type PolicyImpactPreview, type PolicyService } from '@ets/domain';
import { callerOf } from '../middleware/authenticate.js';
import type { RouteModule } from '../route-table.js';
import { PAGE_QUERY, readPaging } from './paging.js';

export interface PolicyRoutesDeps {
  policies: PolicyService;
  governance: PolicyGovernance;
  impact: PolicyImpactPreview;
}

const field = (body: unknown, name: string): unknown =>
  body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined;

/**
 * Policies (spec 4.1, 9.3) and their maker-checker governance (CONTRACT "Governance"). Statuses and
 * codes of every refusal are listed in the OpenAPI document (tag Policies).
 */
export const policyRoutes = (deps: PolicyRoutesDeps): RouteModule => (t) => {
  // Spec 2.1: every status but 401 answers {valid, errors}.
  t.post('/policies/validate', { auth: 'key', errorShape: 'validation' }, async (req, res) => {
    res.json(await deps.policies.validate(field(req.body, 'policyId'), field(req.body, 'policyVersion')));
  });

  t.get('/policies/in-effect', { auth: 'key' }, async (_req, res) => {
    res.json(await deps.policies.inEffect());
  });

  t.get('/policies/pending-changes', { auth: 'key', query: ['status', ...PAGE_QUERY] }, async (req, res) => {
    res.json(await deps.governance.list({ status: req.query.status, ...readPaging(req.query) }));
  });

  t.post('/policies/:name/:version/pending-changes', { auth: 'key' }, async (req, res) => {
    const change = await deps.governance.propose(callerOf(res), String(req.params.name), String(req.params.version), req.body);
    res.status(201).json(change);
  });

  // Replays up to 10,000 stored decision inputs: through the read gate, like the other heavy reads.
  t.get('/policies/pending-changes/:id/impact', { auth: 'key', heavyRead: true, query: ['limit'] }, async (req, res) => {
    res.json(await deps.impact.preview(callerOf(res), String(req.params.id), req.query.limit));
  });

  t.post('/policies/pending-changes/:id/approve', { auth: 'key' }, async (req, res) => {
    res.json(await deps.governance.approve(String(req.params.id), callerOf(res), req.body));
  });

  t.post('/policies/pending-changes/:id/reject', { auth: 'key' }, async (req, res) => {
    res.json(await deps.governance.reject(String(req.params.id), callerOf(res), req.body));
  });
};

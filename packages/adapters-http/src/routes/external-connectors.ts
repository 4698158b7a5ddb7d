import type { GovernedRegistry } from '@ets/domain';
import { callerOf } from '../middleware/authenticate.js';
import type { RouteModule } from '../route-table.js';
import { PAGE_QUERY, readPaging } from './paging.js';

/**
 * The routes of a governed registry (CONTRACT "Governance"): `POST /<area>/changes` (propose),
 * `GET /<area>/changes` (list), `POST /<area>/changes/{id}/approve` and `…/reject` (step-up
 * envelope), and `GET /<area>` (what is in force). External connectors, business signal sources
 * and authority grants are served by it; statuses and codes are in the OpenAPI document (one tag
 * per area).
 */
export const governedRegistryRoutes = (area: string, governance: GovernedRegistry<unknown, unknown>): RouteModule => (t) => {
  t.get(area, { auth: 'key', query: PAGE_QUERY }, async (req, res) => {
    const { page, pageSize } = readPaging(req.query);
    res.json(await governance.listActive(page, pageSize));
  });

  t.get(`${area}/changes`, { auth: 'key', query: ['status', ...PAGE_QUERY] }, async (req, res) => {
    res.json(await governance.list({ status: req.query.status, ...readPaging(req.query) }));
  });

  t.post(`${area}/changes`, { auth: 'key' }, async (req, res) => {
    res.status(201).json(await governance.propose(callerOf(res), req.body));
  });

  t.post(`${area}/changes/:id/approve`, { auth: 'key' }, async (req, res) => {
    res.json(await governance.approve(String(req.params.id), callerOf(res), req.body));
  });

  t.post(`${area}/changes/:id/reject`, { auth: 'key' }, async (req, res) => {
    res.json(await governance.reject(String(req.params.id), callerOf(res), req.body));
  });
};

export interface ExternalConnectorRoutesDeps {
  governance: GovernedRegistry<unknown, unknown>;
}

/** External connectors (spec 2.5, 3; CONTRACT "External connector changes"). */
export const externalConnectorRoutes = (deps: ExternalConnectorRoutesDeps): RouteModule => governedRegistryRoutes('/external-connectors', deps.governance);

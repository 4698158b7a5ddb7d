import { DomainError, type GovernedRegistry, type SandboxApprovals } from '@ets/domain';
import type { RouteModule } from '../route-table.js';
import { governedRegistryRoutes } from './external-connectors.js';

export interface BusinessValidationRoutesDeps {
  sources: GovernedRegistry<unknown, unknown>;
  grants: GovernedRegistry<unknown, unknown>;
  /** Sandbox mode only: without it `POST /sandbox/approvals` answers 404, as for a route that does not exist. */
  sandboxApprovals?: SandboxApprovals;
}

/**
 * Business validation (CONTRACT "Business signal sources", "Authority grants", "Signed approvals
 * and overrides in profile T"): the two governed registries, and in sandbox mode the demo
 * approver. Statuses and codes are in the OpenAPI document (tags Business signal sources,
 * Authority grants, Sandbox).
 */
export const businessValidationRoutes = (deps: BusinessValidationRoutesDeps): RouteModule => (t) => {
  governedRegistryRoutes('/business-signal-sources', deps.sources)(t);
  governedRegistryRoutes('/authority-grants', deps.grants)(t);
  // Mounted in every mode so that every profile's document describes exactly what is mounted; outside
  // sandbox mode it is the 404 of an unknown route. The execute limiter: a request it refuses is never signed (spec 7).
  t.post('/sandbox/approvals', { auth: 'key', limiter: 'execute' }, async (req, res) => {
    if (!deps.sandboxApprovals) throw new DomainError('not_found', 'Not found.');
    res.status(201).json(await deps.sandboxApprovals.issue(req.body));
  });
};

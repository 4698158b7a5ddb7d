import type { StorageHealth } from '@ets/domain';
import type { RouteModule } from '../route-table.js';

export interface OperationsDeps {
  storageHealth: StorageHealth;
  /** Internal build identifier (spec 9.1): not a product release number. */
  buildId: string;
  profile: string;
}

/** Liveness, readiness and build identity (spec 4.1). */
export const operationsRoutes = (deps: OperationsDeps): RouteModule => (t) => {
  t.get('/health', { auth: 'none', limiter: 'health' }, (_req, res) => {
    res.json({ status: 'UP' });
  });

  t.get('/ready', { auth: 'none', limiter: 'health' }, async (_req, res) => {
    const r = await deps.storageHealth.readiness();
    if (r.ready) res.json({ status: 'READY' });
    else res.status(503).json({ status: 'NOT_READY', reason: r.reason });
  });

  t.get('/version', { auth: 'key' }, (_req, res) => {
    res.json({ build: deps.buildId, profile: deps.profile });
  });
};

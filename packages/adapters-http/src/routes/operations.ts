import type { StorageHealth } from '@ets/domain';
import type { RouteModule } from '../route-table.js';

export interface OperationsDeps {
  storageHealth: StorageHealth;
  /** Internal build identifier (spec 9.1): not a product release number. */
  buildId: string;
  profile: string;
  /**
   * The shared rate-limit store's state, when one is configured (SVC_REDIS_URL). Redis down does not
   * make the instance NOT_READY: its limiters count on their own meanwhile (degraded, not down).
   */
  redis?: () => 'UP' | 'DOWN';
}

/** Liveness, readiness and build identity (spec 4.1). */
export const operationsRoutes = (deps: OperationsDeps): RouteModule => (t) => {
  t.get('/health', { auth: 'none', limiter: 'health' }, (_req, res) => {
    res.json({ status: 'UP' });
  });

  t.get('/ready', { auth: 'none', limiter: 'health' }, async (_req, res) => {
    const r = await deps.storageHealth.readiness();
    const redis = deps.redis ? { redis: deps.redis() } : {};
    if (r.ready) res.json({ status: 'READY', ...redis });
    else res.status(503).json({ status: 'NOT_READY', reason: r.reason, ...redis });
  });

  t.get('/version', { auth: 'key' }, (_req, res) => {
    res.json({ build: deps.buildId, profile: deps.profile });
  });
};

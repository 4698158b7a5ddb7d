import type {
  AttestationAudit,
  AttestationRuntime,
  AttestationService,
  AttestationStore,
  AttestationVerifier,
  Clock,
  ExecutionConfirmation,
  OverrideService,
  ServiceProfile,
} from '@ets/domain';
import { callerOf, routeOf } from '../middleware/authenticate.js';
import type { Handler, RouteModule } from '../route-table.js';

export interface AttestationRoutesDeps {
  profile: ServiceProfile;
  service: AttestationService;
  verifier: AttestationVerifier;
  overrides: OverrideService;
  confirmation: ExecutionConfirmation;
  audit: AttestationAudit;
  runtime: AttestationRuntime;
  store: Pick<AttestationStore, 'recordApiCall' | 'isAvailable'>;
  clock: Clock;
  /** Where the signing key comes from (`disk` today), as `GET /health` reports it. */
  signingMode: string;
}

/**
 * Profile A (spec 4.2). `/execute`, `/verify` and `/health` are mounted in their profile-A shape
 * only when the process serves an attestation profile; the other routes exist in every profile
 * (CONTRACT "Profiles"). In `attestation-simple` every route here but `/override` authenticates with
 * SVC_API_KEY (spec 5.5). Every answered call is recorded for the audit, except the dry runs (`/evaluate`,
 * `/simulate`: no side effect at all, not even the audit event of a successful authentication) and
 * `/health`.
 */
export const attestationRoutes = (d: AttestationRoutesDeps): RouteModule => (t) => {
  const auth = d.profile === 'attestation-simple' ? 'simple-key' : 'key';
  const recorded =
    (handler: Handler): Handler =>
    async (req, res) => {
      const started = process.hrtime.bigint();
      res.once('finish', () =>
        d.store.recordApiCall({
          method: req.method,
          route: routeOf(req),
          status: res.statusCode,
          callerId: callerOf(res).callerId,
          durationMs: Number(process.hrtime.bigint() - started) / 1e6,
          occurredAt: d.clock.now().toISOString(),
        }),
      );
      await handler(req, res);
    };

  if (d.profile !== 'transaction') {
    const simple = d.profile === 'attestation-simple';
    t.post('/execute', { auth, limiter: 'execute' }, recorded(async (req, res) => {
      res.status(200).json(await d.service.execute(callerOf(res), req.body));
    }));
    t.post('/verify', { auth }, recorded(async (req, res) => {
      res.status(200).json(simple ? await d.verifier.verifySimple(callerOf(res), req.body) : await d.verifier.verify(callerOf(res), req.body));
    }));
    t.get('/health', { auth: 'none', limiter: 'health' }, async (_req, res) => {
      const state = d.runtime.state();
      const m = state.configured ? state.manifest.manifest : undefined;
      res.json({
        status: 'ok',
        runtimeVersion: m?.version ?? null,
        runtimeHash: m?.runtimeHash ?? null,
        verification: d.runtime.selfCheck() ? 'ok' : 'error',
        audit_db: await d.store.isAvailable(),
        signing_mode: d.signingMode,
        capabilities: d.runtime.capabilities,
        supportedSchemaVersions: d.runtime.supportedSchemaVersions,
      });
    });
  }

  // Dry runs: no audit record at all, not even of the caller's successful authentication (spec 6).
  t.post('/evaluate', { auth, audit: false }, async (req, res) => {
    res.json(await d.service.evaluate(req.body));
  });
  t.post('/simulate', { auth, audit: false }, async (req, res) => {
    res.json(await d.service.simulate(req.body));
  });
  // A human decides, with their own key from the key directory, in every profile: the simple
  // variant's one SVC_API_KEY caller is the requester, never a human (CONTRACT "Review rules, round 2").
  t.post('/override', { auth: 'key' }, recorded(async (req, res) => {
    res.json(await d.overrides.resolve(callerOf(res), req.body));
  }));
  t.post('/confirm-execution', { auth }, recorded(async (req, res) => {
    res.json(await d.confirmation.confirm(callerOf(res), req.body));
  }));

  t.get('/runtime/manifest', { auth }, recorded((_req, res) => {
    const { manifest, manifestHash, manifestSignature } = d.runtime.require();
    res.json({ ...manifest, manifestHash, manifestSignature });
  }));
  t.get('/runtime/capabilities', { auth }, recorded((_req, res) => {
    res.json({ capabilities: d.runtime.capabilities });
  }));

  t.get('/audit/decisions', { auth, query: ['limit', 'offset', 'policyId', 'decision', 'from', 'to'] }, recorded(async (req, res) => {
    res.json(await d.audit.decisions(callerOf(res), req.query));
  }));
  t.get('/audit/decisions/:executionId', { auth }, recorded(async (req, res) => {
    res.json(await d.audit.decision(callerOf(res), String(req.params.executionId)));
  }));
  t.get('/audit/stats', { auth }, recorded(async (_req, res) => {
    res.json(await d.audit.stats(callerOf(res)));
  }));
  t.get('/audit/security', { auth, query: ['from', 'to', 'limit'] }, recorded(async (req, res) => {
    res.json(await d.audit.security(callerOf(res), req.query));
  }));
};

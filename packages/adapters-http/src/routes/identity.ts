import type { AuditEvent, AuditEventStore, Signed, SignatureVerifier } from '@ets/domain';
import { DomainError } from '@ets/domain';
import { callerOf } from '../middleware/authenticate.js';
import type { RouteModule } from '../route-table.js';

export interface IdentityRoutesDeps {
  auditEvents: AuditEventStore;
  verifier: SignatureVerifier;
}

const MAX_LIMIT = 500;
const EVENT_ID = /^[\x21-\x7e]{1,128}$/;

/** `/callers/me`, the authentication audit trail and its public verification (spec 5, 6). */
export const identityRoutes = (deps: IdentityRoutesDeps): RouteModule => (t) => {
  t.get('/callers/me', { auth: 'key' }, (_req, res) => {
    const c = callerOf(res);
    res.json({
      callerId: c.callerId,
      credentialHolderType: c.credentialHolderType ?? null,
      allowedCapabilities: c.allowedCapabilities,
      allowedPrincipalIds: c.allowedPrincipalIds.length > 0 ? c.allowedPrincipalIds : [c.callerId],
      allowedTenantIds: c.allowedTenantIds,
      stepUpKeyRegistered: c.stepUpPublicKeyPem !== undefined,
    });
  });

  // Newest first, paged by a cursor rather than by page number: reading the list is itself an
  // authentication, audited as the newest event, so numbered pages would shift under the reader.
  t.get('/audit/auth-events', { auth: 'key', query: ['limit', 'before', 'beforeEventId'] }, async (req, res) => {
    const caller = callerOf(res);
    const limitRaw = req.query.limit ?? '50';
    if (typeof limitRaw !== 'string' || !/^\d+$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > MAX_LIMIT) {
      throw new DomainError('invalid', `limit must be a whole number from 1 to ${MAX_LIMIT}.`);
    }
    const before = req.query.before;
    if (before !== undefined && (typeof before !== 'string' || Number.isNaN(Date.parse(before)))) {
      throw new DomainError('invalid', 'before must be an ISO 8601 time.');
    }
    const beforeEventId = req.query.beforeEventId;
    if (beforeEventId !== undefined && (typeof beforeEventId !== 'string' || !EVENT_ID.test(beforeEventId))) {
      throw new DomainError('invalid', 'beforeEventId must be the eventId of an event (1 to 128 visible ASCII characters).');
    }
    if (beforeEventId !== undefined && before === undefined) {
      throw new DomainError('invalid', 'beforeEventId goes with before: the occurredAt and the eventId of the last event of the previous page.');
    }
    const events = await deps.auditEvents.list({
      kind: 'caller-authentication',
      // A USER key sees every caller's events; other keys see their own caller's.
      callerId: caller.credentialHolderType === 'USER' ? undefined : caller.callerId,
      limit: Number(limitRaw),
      before: before === undefined ? undefined : new Date(before).toISOString(),
      beforeEventId,
    });
    res.json({ events });
  });

  t.post('/audit/verify', { auth: 'none', limiter: 'public' }, (req, res) => {
    const body = req.body as Partial<Signed<AuditEvent>> | undefined;
    if (!isAuditEvent(body)) throw new DomainError('invalid', 'Body must be a signed audit event as served by GET /audit/auth-events.');
    const result = deps.verifier.verify(body);
    res.json({ valid: result.valid, keyId: result.keyId ?? body.keyId, errors: result.errors });
  });
};

function isAuditEvent(v: unknown): v is Signed<AuditEvent> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const e = v as Record<string, unknown>;
  return (
    typeof e.eventId === 'string' &&
    (e.kind === 'caller-authentication' || e.kind === 'governance') &&
    typeof e.occurredAt === 'string' &&
    typeof e.signature === 'string' &&
    typeof e.keyId === 'string'
  );
}

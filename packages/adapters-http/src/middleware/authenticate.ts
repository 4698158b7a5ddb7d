import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { DomainError, type AuthenticationAudit, type Caller, type CallerDirectory, type PendingAuthEvent } from '@ets/domain';
import { AUTHENTICATION_REQUIRED } from '../http-errors.js';
import { headerCount } from './raw-headers.js';
import { checkCsrf, sessionIdOf, type SessionResolver } from './session-cookie.js';

// The scheme name is case-insensitive (RFC 9110 11.1); the key is one token of visible ASCII.
export const BEARER = /^Bearer ([\x21-\x7e]{1,512})$/i;

/** The failed-authentication limit per client address (spec 5.10, 8), as authentication uses it. */
export interface FailedAuthenticationLimit {
  /**
   * Counts one failed authentication of the request's address, atomically with reading the count
   * (so concurrent failures cannot all see room under the limit). Over the limit: sets
   * `Retry-After` and returns the 429 error to answer; otherwise undefined (answer 401).
   */
  countFailure(req: Request, res: Response): Promise<DomainError | undefined>;
}

/**
 * A route's authentication in steps (createHttpApp mounts them): `identify` sets
 * `res.locals.caller` or refuses; `audit` records the success; `prepareAudit`, where there is one,
 * signs it for the route's handler to store instead (RouteOptions.auditInPipeline).
 */
export interface Authentication {
  identify: RequestHandler;
  audit: RequestHandler;
  prepareAudit?: RequestHandler;
}

export interface AuthenticationOptions {
  directory: CallerDirectory;
  /** `prepare` (sign now, store later) serves the routes whose handler stores the event (auditInPipeline). */
  audit: Pick<AuthenticationAudit, 'record'> & Partial<Pick<AuthenticationAudit, 'prepare'>>;
  /** Without one, every failure is answered 401. */
  failureLimit?: FailedAuthenticationLimit;
  /** Told of every failed attempt after it is audited (profile A records it as a security event). */
  onFailure?: (attempt: { method: string; route: string }) => Promise<void>;
  /**
   * The console's sessions: a request without `Authorization` that sends the `ets_session` cookie
   * is authenticated by it, as the key that signed in (an unknown or expired session is a failed
   * authentication like an unknown key); a write so made needs the CSRF token too.
   */
  sessions?: SessionResolver;
}

export const routeOf = (req: Request): string => (req.route as { path?: string } | undefined)?.path ?? req.path;

/**
 * A failed authentication: counted against the address's failed-authentication limit (over it:
 * 429, neither signed nor stored), else audited, told to `onFailure`, and answered 401 (spec 5.2).
 */
export async function refuseAuthentication(
  options: Pick<AuthenticationOptions, 'audit' | 'onFailure' | 'failureLimit'>,
  req: Request,
  res: Response,
  next: NextFunction,
): Promise<void> {
  next(await failedAuthentication(options, req, res));
}

/** The same, as the error to answer with (429 or 401), for a handler that authenticates by itself (console sign-in). */
export async function failedAuthentication(
  options: Pick<AuthenticationOptions, 'audit' | 'onFailure' | 'failureLimit'>,
  req: Request,
  res: Response,
): Promise<DomainError> {
  const refused = await options.failureLimit?.countFailure(req, res);
  if (refused) return refused;
  await options.audit.record({ callerId: null, method: req.method, route: routeOf(req), outcome: 'FAILURE' });
  await options.onFailure?.({ method: req.method, route: routeOf(req) });
  return new DomainError('unauthenticated', AUTHENTICATION_REQUIRED);
}

/** Records a successful authentication (after the per-caller limit, so a refused request is never audited as served). */
export function auditSuccess(audit: AuthenticationOptions['audit']): RequestHandler {
  return async (req, res, next) => {
    await audit.record({ callerId: callerOf(res).callerId, method: req.method, route: routeOf(req), outcome: 'SUCCESS' });
    next();
  };
}

/** The signed event of a successful authentication, left for the route to store (RouteOptions.auditInPipeline). */
export function prepareAuditSuccess(audit: Pick<AuthenticationAudit, 'prepare'>): RequestHandler {
  return async (req, res, next) => {
    res.locals.pendingAudit = await audit.prepare({ callerId: callerOf(res).callerId, method: req.method, route: routeOf(req), outcome: 'SUCCESS' });
    next();
  };
}

/** The request's pending authentication event (routes with auditInPipeline), if it has one. */
export const pendingAuditOf = (res: Response): PendingAuthEvent | undefined => res.locals.pendingAudit as PendingAuthEvent | undefined;

/**
 * Caller authentication (spec 5): `Authorization: Bearer <key>` or 401, before any body is read.
 * Every answered attempt, successful or not, is a signed audit event; if it cannot be stored the
 * request fails (AUDIT_UNAVAILABLE) rather than going on unaudited.
 *
 * The key is checked first (in memory, in constant time), so a valid key is never refused by the
 * failed-authentication limit, whatever others sent from the same address (a NAT, a proxy). Only
 * a failure is counted; one over the limit is answered 429 and neither signed nor stored, so
 * failures cannot flood the audit log either.
 *
 * Two steps, so that the per-caller rate limit can sit between them: `identify` resolves the key
 * (a failure is counted, audited and answered at once); `audit` records the success. A request the
 * per-caller limiter refuses is therefore never signed or stored (spec 7: nothing is signed).
 */
export function bearerAuthentication(options: AuthenticationOptions): Authentication {
  const { prepare } = options.audit;
  return {
    ...(prepare ? { prepareAudit: prepareAuditSuccess({ prepare: prepare.bind(options.audit) }) } : {}),
    identify: async (req: Request, res: Response, next: NextFunction) => {
      const sessionId = options.sessions && headerCount(req, 'authorization') === 0 ? sessionIdOf(req) : undefined;
      if (sessionId !== undefined) {
        const session = await options.sessions!.resolve(sessionId);
        if (!session) return refuseAuthentication(options, req, res, next);
        checkCsrf(req, session);
        res.locals.caller = session.caller;
        res.locals.session = { id: sessionId, expiresAt: session.expiresAt, csrfToken: session.csrfToken } satisfies RequestSession;
        return next();
      }
      const key = presentedKey(req);
      const caller = key === undefined ? undefined : options.directory.authenticate(key);
      if (!caller) return refuseAuthentication(options, req, res, next);
      res.locals.caller = caller;
      next();
    },
    audit: auditSuccess(options.audit),
  };
}

/**
 * The one bearer key the request presents. Node keeps only the first of several `Authorization`
 * headers in `req.headers`; which key counts must not depend on that, so a request with more than
 * one presents no key at all.
 */
export function presentedKey(req: Request): string | undefined {
  if (headerCount(req, 'authorization') !== 1) return undefined;
  return BEARER.exec(req.headers.authorization ?? '')?.[1];
}

/** SVC_AUTH_DISABLED=true (spec 5.4): every request runs as this caller; nothing is checked. */
export const AUTH_DISABLED_CALLER: Caller & { authDisabled: true } = {
  callerId: 'anonymous',
  allowedCapabilities: ['*'],
  allowedPrincipalIds: [],
  allowedTenantIds: [],
  authDisabled: true,
};

export function noAuthentication(): Authentication {
  return {
    identify: (_req, res, next) => {
      res.locals.caller = AUTH_DISABLED_CALLER;
      next();
    },
    audit: (_req, _res, next) => next(),
  };
}

/** The console session a request was authenticated by. */
export interface RequestSession {
  id: string;
  expiresAt: string;
  csrfToken: string;
}

/** The console session a request was authenticated by, if it was (not a bearer key). */
export const sessionOf = (res: Response): RequestSession | undefined => res.locals.session as RequestSession | undefined;

/** The authenticated caller of a keyed route. */
export function callerOf(res: Response): Caller {
  const caller = res.locals.caller as Caller | undefined;
  if (!caller) throw new Error('callerOf used on a route without authentication');
  return caller;
}

export const isAuthDisabled = (caller: Caller): boolean => (caller as { authDisabled?: boolean }).authDisabled === true;

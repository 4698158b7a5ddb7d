import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { DomainError, type AuthenticationAudit, type Caller, type CallerDirectory } from '@ets/domain';
import { AUTHENTICATION_REQUIRED } from '../http-errors.js';

// The scheme name is case-insensitive (RFC 9110 11.1); the key is one token of visible ASCII.
const BEARER = /^Bearer ([\x21-\x7e]{1,512})$/i;

export interface AuthenticationOptions {
  directory: CallerDirectory;
  audit: Pick<AuthenticationAudit, 'record'>;
}

/**
 * Caller authentication (spec 5): `Authorization: Bearer <key>` or 401, before any body is read.
 * Every attempt, successful or not, is a signed audit event; if it cannot be stored the request
 * fails (AUDIT_UNAVAILABLE) rather than going on unaudited.
 *
 * Two steps, so that the per-caller rate limit can sit between them: `identify` resolves the key
 * (a failure is audited and answered 401 at once); `audit` records the success. A request the
 * per-caller limiter refuses is therefore never signed or stored (spec 7: nothing is signed).
 */
export function bearerAuthentication(options: AuthenticationOptions): { identify: RequestHandler; audit: RequestHandler } {
  const routeOf = (req: Request): string => (req.route as { path?: string } | undefined)?.path ?? req.path;
  return {
    identify: async (req: Request, res: Response, next: NextFunction) => {
      const match = BEARER.exec(req.get('authorization') ?? '');
      const caller = match ? options.directory.authenticate(match[1]!) : undefined;
      if (!caller) {
        await options.audit.record({ callerId: null, method: req.method, route: routeOf(req), outcome: 'FAILURE' });
        return next(new DomainError('unauthenticated', AUTHENTICATION_REQUIRED));
      }
      res.locals.caller = caller;
      next();
    },
    audit: async (req: Request, res: Response, next: NextFunction) => {
      await options.audit.record({ callerId: callerOf(res).callerId, method: req.method, route: routeOf(req), outcome: 'SUCCESS' });
      next();
    },
  };
}

/** SVC_AUTH_DISABLED=true (spec 5.4): every request runs as this caller; nothing is checked. */
export const AUTH_DISABLED_CALLER: Caller & { authDisabled: true } = {
  callerId: 'anonymous',
  allowedCapabilities: ['*'],
  allowedPrincipalIds: [],
  allowedTenantIds: [],
  authDisabled: true,
};

export function noAuthentication(): { identify: RequestHandler; audit: RequestHandler } {
  return {
    identify: (_req, res, next) => {
      res.locals.caller = AUTH_DISABLED_CALLER;
      next();
    },
    audit: (_req, _res, next) => next(),
  };
}

/** The authenticated caller of a keyed route. */
export function callerOf(res: Response): Caller {
  const caller = res.locals.caller as Caller | undefined;
  if (!caller) throw new Error('callerOf used on a route without authentication');
  return caller;
}

export const isAuthDisabled = (caller: Caller): boolean => (caller as { authDisabled?: boolean }).authDisabled === true;

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
 */
export function bearerAuthentication(options: AuthenticationOptions): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    const match = BEARER.exec(req.get('authorization') ?? '');
    const caller = match ? options.directory.authenticate(match[1]!) : undefined;
    const route = (req.route as { path?: string } | undefined)?.path ?? req.path;
    await options.audit.record({
      callerId: caller?.callerId ?? null,
      method: req.method,
      route,
      outcome: caller ? 'SUCCESS' : 'FAILURE',
    });
    if (!caller) return next(new DomainError('unauthenticated', AUTHENTICATION_REQUIRED));
    res.locals.caller = caller;
    next();
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

export function noAuthentication(): RequestHandler {
  return (_req, res, next) => {
    res.locals.caller = AUTH_DISABLED_CALLER;
    next();
  };
}

/** The authenticated caller of a keyed route. */
export function callerOf(res: Response): Caller {
  const caller = res.locals.caller as Caller | undefined;
  if (!caller) throw new Error('callerOf used on a route without authentication');
  return caller;
}

export const isAuthDisabled = (caller: Caller): boolean => (caller as { authDisabled?: boolean }).authDisabled === true;

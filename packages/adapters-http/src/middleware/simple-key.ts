import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { AuthenticationAudit, Caller } from '@ets/domain';
import { auditSuccess, presentedKey, refuseAuthentication, type Authentication, type AuthenticationOptions } from './authenticate.js';

/**
 * The one caller of the `attestation-simple` profile: whoever holds SVC_API_KEY, or anyone when it
 * is unset. It reads every record (read-scope.ts).
 */
type SingleCaller = Caller & { singleCaller: true; unauthenticated?: true };
const single = (callerId: string): SingleCaller => ({ callerId, allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [], singleCaller: true });
export const SIMPLE_KEY_CALLER: SingleCaller = single('svc-api-key');
// Unauthenticated: anyone may be it, so its per-caller limits count per client address (rate-limits.ts),
// or one client could spend everyone's budget.
export const SIMPLE_OPEN_CALLER: SingleCaller = { ...single('anonymous'), unauthenticated: true };

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * Authentication of the profile-A routes in the `attestation-simple` profile (spec 5.5): with
 * SVC_API_KEY set, `Authorization: Bearer <SVC_API_KEY>` or the same 401 as every keyed route
 * (compared as SHA-256 digests in constant time, so neither the length nor a prefix leaks); without
 * it, no authentication at all. Attempts are audited like every other authentication.
 */
export function simpleKeyAuthentication(options: {
  key: string | undefined;
  audit: Pick<AuthenticationAudit, 'record'>;
  onFailure?: AuthenticationOptions['onFailure'];
  failureLimit?: AuthenticationOptions['failureLimit'];
}): Authentication {
  if (options.key === undefined) {
    return {
      identify: (_req, res, next) => {
        res.locals.caller = SIMPLE_OPEN_CALLER;
        next();
      },
      audit: (_req, _res, next) => next(),
    };
  }
  const expected = digest(options.key);
  return {
    identify: async (req: Request, res: Response, next: NextFunction) => {
      const key = presentedKey(req);
      if (key === undefined || !timingSafeEqual(digest(key), expected)) return refuseAuthentication(options, req, res, next);
      res.locals.caller = SIMPLE_KEY_CALLER;
      next();
    },
    audit: auditSuccess(options.audit),
  };
}

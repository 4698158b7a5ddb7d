import type { Response } from 'express';
import { EVERY_CALLER, isVerifiedHuman, type Caller, type ReadScope } from '@ets/domain';
import { callerOf, isAuthDisabled } from './authenticate.js';

/**
 * Who reads every record: a USER key, everyone when authentication is off, the single caller of
 * the attestation-simple variant (simple-key.ts). Any other key reads its own caller's only.
 */
export const readsEverything = (c: Caller): boolean => isVerifiedHuman(c) || isAuthDisabled(c) || (c as { singleCaller?: boolean }).singleCaller === true;

/** The read scope of a caller (CONTRACT "Requests, reads and lists"). */
export const readScopeOf = (c: Caller): ReadScope => (readsEverything(c) ? EVERY_CALLER : { callerId: c.callerId });

/** The read scope of the authenticated caller of a keyed route: every read of its records takes it. */
export const readScope = (res: Response): ReadScope => readScopeOf(callerOf(res));

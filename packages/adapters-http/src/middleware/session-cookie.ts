import { timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { parse } from 'cookie';
import { DomainError, type ResolvedSession } from '@ets/domain';

/** The console's session cookie (CONTRACT "Approvers' console"). */
export const SESSION_COOKIE = 'ets_session';
/** The header a write made with the cookie carries its CSRF token in. */
export const CSRF_HEADER = 'x-csrf-token';

/** Resolves a session cookie's value to its caller (ConsoleSessions.resolve). */
export interface SessionResolver {
  resolve(sessionId: string): Promise<ResolvedSession | undefined>;
}

/** Methods that change something: made with the cookie, they need the CSRF token. */
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The session id of the request's cookie, if it sends exactly one `ets_session` (one Cookie header:
 * which of two counts must not depend on who reads it, as with `Authorization`).
 */
export function sessionIdOf(req: Request): string | undefined {
  const header = req.headers.cookie;
  if (header === undefined) return undefined;
  const occurrences = header.split(';').filter((part) => part.trim().startsWith(`${SESSION_COOKIE}=`)).length;
  if (occurrences !== 1) return undefined;
  const value = parse(header)[SESSION_COOKIE];
  return value === undefined || value === '' ? undefined : value;
}

/**
 * A write made with the session cookie must carry the session's CSRF token in `x-csrf-token`
 * (403 CSRF_TOKEN_INVALID): another site can make a browser send the cookie (SameSite=Strict
 * already stops most of that), but it can never read the token.
 */
export function checkCsrf(req: Request, session: ResolvedSession): void {
  if (!WRITES.has(req.method)) return;
  const sent = req.headers[CSRF_HEADER];
  const expected = Buffer.from(session.csrfToken, 'utf8');
  const given = typeof sent === 'string' ? Buffer.from(sent, 'utf8') : undefined;
  if (!given || given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new DomainError('forbidden', `A change made with the console's session cookie needs its CSRF token in the ${CSRF_HEADER} header.`, 'CSRF_TOKEN_INVALID');
  }
}

export interface SessionCookieOptions {
  /** `Secure`: always over TLS (req.secure, so behind a proxy with SVC_TRUST_PROXY), or when SVC_COOKIE_SECURE=true. */
  secure: boolean;
}

/** Sets the session cookie: HttpOnly (no script reads it), SameSite=Strict, Path=/, no Max-Age (the server ends it). */
export function setSessionCookie(req: Request, res: Response, sessionId: string, options: SessionCookieOptions): void {
  res.cookie(SESSION_COOKIE, sessionId, { httpOnly: true, sameSite: 'strict', path: '/', secure: options.secure || req.secure });
}

export function clearSessionCookie(req: Request, res: Response, options: SessionCookieOptions): void {
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', path: '/', secure: options.secure || req.secure });
}

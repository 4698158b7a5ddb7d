import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DomainError, type AuthenticationAudit, type CallerDirectory, type ConsoleSessions } from '@ets/domain';
import type { Response } from 'express';
import { failedAuthentication, sessionOf, type AuthenticationOptions } from '../middleware/authenticate.js';
import { clearSessionCookie, sessionIdOf, setSessionCookie } from '../middleware/session-cookie.js';
import type { RouteModule } from '../route-table.js';

/**
 * The approvers' console (CONTRACT "Approvers' console"): its page and assets, built by the
 * `@ets/console` workspace (Preact, bundled by esbuild) and served from this service only, so it
 * works air-gapped; and its sign-in, which trades a USER key for a session cookie once, so that the
 * key is never kept in the browser. The page is a client of the same API as any other: with the
 * cookie, every route authenticates as the key that signed in (authenticate.ts).
 */

/**
 * Only what the page itself needs: its own script, style and API (`'self'`), images from data
 * URLs; no inline script or style, no frames, no form posts elsewhere.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export interface ConsoleAsset {
  type: string;
  body: Buffer;
}

/** The built console: its HTML page and its assets by file name (the names carry a content hash). */
export interface ConsoleAssets {
  page: Buffer;
  files: ReadonlyMap<string, ConsoleAsset>;
}

const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml' };

/** Reads `console.html` and `assets/*` of the console's build folder; undefined when it was not built (or there is none). */
export function loadConsoleAssets(distDir: string | undefined): ConsoleAssets | undefined {
  if (distDir === undefined) return undefined;
  const pageFile = path.join(distDir, 'console.html');
  const assetsDir = path.join(distDir, 'assets');
  if (!existsSync(pageFile) || !existsSync(assetsDir)) return undefined;
  const files = new Map<string, ConsoleAsset>();
  for (const name of readdirSync(assetsDir)) {
    const type = TYPES[path.extname(name)];
    if (type) files.set(name, { type, body: readFileSync(path.join(assetsDir, name)) });
  }
  return { page: readFileSync(pageFile), files };
}

export interface ConsoleRoutesDeps {
  sessions: Pick<ConsoleSessions, 'signIn' | 'signOut' | 'resolve'>;
  directory: CallerDirectory;
  /** A sign-in is an authentication like any other: audited, and a failure counted against the address's limit. */
  authentication: Pick<AuthenticationOptions, 'audit' | 'onFailure' | 'failureLimit'> & { audit: Pick<AuthenticationAudit, 'record'> };
  /** SVC_COOKIE_SECURE: `Secure` on the cookie even over plain HTTP (a TLS proxy in front); over TLS it always is. */
  cookieSecure: boolean;
  /** The built console; none: `/console` says how to build it (503). */
  assets?: ConsoleAssets;
}

const NOT_BUILT = 'The console is not built: run `npm run build` in the repository.';
/** Hashed file names: an asset never changes under its name. */
const ASSET_CACHE = 'public, max-age=31536000, immutable';

const securityHeaders = (res: Response): void => {
  res.setHeader('Content-Security-Policy', CONSOLE_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
};

const field = (body: unknown, name: string): unknown =>
  body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined;

export const consoleRoutes = (deps: ConsoleRoutesDeps): RouteModule => (t) => {
  const cookie = { secure: deps.cookieSecure };

  t.get('/console', { auth: 'none', limiter: 'public' }, (_req, res) => {
    if (!deps.assets) throw new DomainError('unavailable', NOT_BUILT);
    securityHeaders(res);
    // The page names its assets by hash: a new build is picked up at the next load.
    res.setHeader('Cache-Control', 'no-store');
    res.type('html').send(deps.assets.page);
  });

  t.get('/console/assets/:file', { auth: 'none', limiter: 'public' }, (req, res) => {
    const asset = deps.assets?.files.get(String(req.params.file));
    if (!asset) throw new DomainError('not_found', 'No such file.');
    securityHeaders(res);
    res.setHeader('Cache-Control', ASSET_CACHE);
    res.type(asset.type).send(asset.body);
  });

  // Sign-in: the key comes in the body, once; the answer sets the cookie and gives the CSRF token.
  t.post('/console/session', { auth: 'none', limiter: 'public' }, async (req, res) => {
    const apiKey = field(req.body, 'apiKey');
    if (typeof apiKey !== 'string' || apiKey === '') throw new DomainError('invalid', 'Body must be {"apiKey": "<your USER key>"}.');
    const caller = apiKey.length <= 512 ? deps.directory.authenticate(apiKey) : undefined;
    if (!caller) throw await failedAuthentication(deps.authentication, req, res);
    await deps.authentication.audit.record({ callerId: caller.callerId, method: req.method, route: '/console/session', outcome: 'SUCCESS' });
    const opened = await deps.sessions.signIn(caller, apiKey);
    setSessionCookie(req, res, opened.sessionId, cookie);
    res.setHeader('Cache-Control', 'no-store');
    res.status(201).json({ callerId: opened.callerId, csrfToken: opened.csrfToken, expiresAt: opened.expiresAt });
  });

  // A page loaded again (a reload, a new tab) asks whether this browser has a session, and for its
  // CSRF token; another site cannot read the answer. Public, so that a page without a session (the
  // sign-in page) costs no failed authentication: only a cookie that names no live session does.
  t.get('/console/session', { auth: 'none', limiter: 'public' }, async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const sessionId = sessionIdOf(req);
    if (sessionId === undefined) throw new DomainError('not_found', 'This browser has no console session: sign in with POST /console/session.');
    const session = await deps.sessions.resolve(sessionId);
    if (!session) {
      clearSessionCookie(req, res, cookie);
      throw await failedAuthentication(deps.authentication, req, res);
    }
    await deps.authentication.audit.record({ callerId: session.caller.callerId, method: req.method, route: '/console/session', outcome: 'SUCCESS' });
    res.json({ callerId: session.caller.callerId, csrfToken: session.csrfToken, expiresAt: session.expiresAt });
  });

  // Sign-out: the session ends on every instance at once; the cookie is cleared.
  t.delete('/console/session', { auth: 'key' }, async (req, res) => {
    const session = sessionOf(res);
    if (!session) throw new DomainError('not_found', 'This request was not made with a console session (the ets_session cookie).');
    await deps.sessions.signOut(session.id);
    clearSessionCookie(req, res, cookie);
    res.status(204).end();
  });
};

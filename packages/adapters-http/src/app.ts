import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { DomainError, type Logger } from '@ets/domain';
import { errorHandler } from './middleware/error-handler.js';
import { jsonBody } from './middleware/json-body.js';
import { requestContext } from './middleware/request-context.js';
import { RouteTable, type LimiterName, type RouteModule, type RouteSpec } from './route-table.js';

export interface HttpAppOptions {
  logger: Logger;
  bodyLimitBytes: number;
  modules: RouteModule[];
  /**
   * Caller authentication for `auth: 'key'` routes: `identify` sets `res.locals.caller` or fails with
   * 401; `audit` records the successful authentication after the per-caller rate limit. A single
   * handler stands for `identify` with nothing to audit.
   */
  authenticate: RequestHandler | { identify: RequestHandler; audit: RequestHandler };
  /** Rate limiters by name; a route names the one it needs (spec 8). */
  limiters: Partial<Record<LimiterName, RequestHandler>>;
  /** Runs after authentication, for limiters keyed by caller (the execute limiter). */
  callerLimiters?: Partial<Record<LimiterName, RequestHandler>>;
  /** Runs before authentication on every keyed route: the failed-authentication limit per IP (spec 8). */
  authFailure?: RequestHandler;
  /** Express `trust proxy` setting, so per-IP limits see the client behind a proxy. */
  trustProxy?: boolean | number | string;
}

export interface HttpApp {
  app: Express;
  routes: readonly RouteSpec[];
}

/**
 * Builds the Express application. Order per route: rate limit (public routes) or failed-authentication
 * limit (keyed routes), caller identification (before any body is read, spec 5.2), the per-caller
 * limit, the audit of the authentication, body parsing, the handler; then one error handler.
 */
export function createHttpApp(options: HttpAppOptions): HttpApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', options.trustProxy ?? false);
  app.set('json escape', true);
  app.use(requestContext(options.logger));

  const table = new RouteTable();
  for (const mod of options.modules) mod(table);
  const body = jsonBody(options.bodyLimitBytes);
  const auth = typeof options.authenticate === 'function' ? { identify: options.authenticate, audit: undefined } : options.authenticate;

  for (const route of table.routes) {
    const chain: RequestHandler[] = [];
    chain.push(setErrorShape(route));
    if (route.limiter && route.auth === 'none' && options.limiters[route.limiter]) chain.push(options.limiters[route.limiter]!);
    if (route.auth === 'key') {
      if (options.authFailure) chain.push(options.authFailure);
      chain.push(auth.identify);
      const byCaller = route.limiter && options.callerLimiters?.[route.limiter];
      if (byCaller) chain.push(byCaller);
      if (auth.audit) chain.push(auth.audit);
    }
    if (route.method !== 'get') chain.push(...body);
    chain.push(async (req: Request, res: Response) => {
      await route.handler(req, res);
    });
    app[route.method](route.path, ...chain);
  }

  app.use((_req: Request, _res: Response, next: NextFunction) => next(new DomainError('not_found', 'Not found.')));
  app.use(errorHandler(options.logger));
  return { app, routes: table.routes };
}

function setErrorShape(route: RouteSpec): RequestHandler {
  return (_req, res, next) => {
    res.locals.errorShape = route.errorShape ?? 'envelope';
    next();
  };
}

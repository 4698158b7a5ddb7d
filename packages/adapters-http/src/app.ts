import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { DomainError, type Logger } from '@ets/domain';
import type { Authentication } from './middleware/authenticate.js';
import { errorHandler } from './middleware/error-handler.js';
import { jsonBody } from './middleware/json-body.js';
import { requestContext } from './middleware/request-context.js';
import { observeAnswers, type HttpObserver } from './middleware/observe.js';
import { refuseNulInUrl, refuseUnknownQuery } from './middleware/url-input.js';
import { gatedBy, ReadGate } from './read-gate.js';
import { RouteTable, toOpenApiPath, type LimiterName, type RouteModule, type RouteSpec } from './route-table.js';

export interface HttpAppOptions {
  logger: Logger;
  bodyLimitBytes: number;
  modules: RouteModule[];
  /**
   * Caller authentication for `auth: 'key'` routes: `identify` sets `res.locals.caller` or fails with
   * 401 (a failure is audited there); `audit` records the successful authentication after the
   * per-caller rate limit, on every route but those declared `audit: false`. A single handler
   * stands for `identify` with nothing to audit.
   */
  authenticate: RequestHandler | Authentication;
  /** Authentication of `auth: 'simple-key'` routes (the attestation-simple profile, spec 5.5). */
  simpleKeyAuthentication?: Authentication;
  /** Rate limiters by name; a route names the one it needs (spec 8). */
  limiters: Partial<Record<LimiterName, RequestHandler>>;
  /** Runs after authentication, for limiters keyed by caller (the execute limiter). */
  callerLimiters?: Partial<Record<LimiterName, RequestHandler>>;
  /** Express `trust proxy` setting, so per-IP limits see the client behind a proxy. */
  trustProxy?: boolean | number | string;
  /** The gate of `heavyRead` routes; default: one per app with RECORD_READ_LIMITS. */
  recordReads?: ReadGate;
  /** Told about every answer (metrics); by route pattern, never the raw path. */
  observer?: HttpObserver;
}

export interface HttpApp {
  app: Express;
  routes: readonly RouteSpec[];
  /** The gate every `heavyRead` route passes (its stats show what it serves and what waits). */
  recordReads: ReadGate;
  /** Route handlers running now (shutdown waits for them before the database closes). */
  inFlight(): number;
  /** Resolves once no route handler is running. */
  idle(): Promise<void>;
  /**
   * From now on every answer carries `Connection: close`, so that clients do not send another
   * request on a connection that is about to be closed (graceful shutdown).
   */
  closeConnectionsAfterAnswers(): void;
}

/**
 * Builds the Express application. Order per route: rate limit (public routes), caller
 * identification with its failed-authentication limit (keyed routes; before any body is read, spec
 * 5.2), the per-caller limit, the audit of the authentication (unless the route says `audit:
 * false`), the input rules (no U+0000 in the URL, no query parameter the route does not declare;
 * the body read as strict JSON), the record-read gate (heavy reads), the handler; then one error
 * handler.
 */
export function createHttpApp(options: HttpAppOptions): HttpApp {
  const app = express();
  app.disable('x-powered-by');
  // No ETag: Express would hash every body it sends (a signed record, a whole page of them) for a
  // conditional GET no client of this API makes; records are fetched by id and verified, not cached.
  app.set('etag', false);
  app.set('trust proxy', options.trustProxy ?? false);
  app.set('json escape', true);
  let closing = false;
  // Decided when the head is written, so that answers of requests already running get it too.
  app.use((_req: Request, res: Response, next: NextFunction) => {
    const writeHead = res.writeHead;
    res.writeHead = function (this: Response, ...args: Parameters<Response['writeHead']>) {
      if (closing && !this.headersSent) this.setHeader('Connection', 'close');
      return writeHead.apply(this, args);
    } as Response['writeHead'];
    next();
  });
  app.use(requestContext(options.logger));
  const handlers = new InFlight();

  const table = new RouteTable();
  for (const mod of options.modules) mod(table);
  const body = jsonBody(options.bodyLimitBytes);
  const auth: Pick<Authentication, 'identify'> & Partial<Authentication> =
    typeof options.authenticate === 'function' ? { identify: options.authenticate } : options.authenticate;
  const recordReads = options.recordReads ?? new ReadGate();

  for (const route of table.routes) {
    const chain: RequestHandler[] = [];
    if (options.observer) chain.push(observeAnswers(options.observer, route.method, toOpenApiPath(route.path)));
    chain.push(setErrorShape(route));
    if (route.limiter && route.auth === 'none' && options.limiters[route.limiter]) chain.push(options.limiters[route.limiter]!);
    // After the caller limit: the limiter and the audit, before the body or (limitedBody) after it.
    const afterLimit: RequestHandler[] = [];
    let byCaller: RequestHandler | undefined;
    if (route.auth !== 'none') {
      const a = route.auth === 'simple-key' ? options.simpleKeyAuthentication : auth;
      if (!a) throw new Error(`${route.method.toUpperCase()} ${route.path} needs simpleKeyAuthentication`);
      chain.push(a.identify);
      byCaller = route.limiter ? options.callerLimiters?.[route.limiter] : undefined;
      if (route.audit !== false) {
        const audit = (route.auditInPipeline && a.prepareAudit) || a.audit;
        if (audit) afterLimit.push(audit);
      }
    }
    if (!route.limitedBody) chain.push(...(byCaller ? [byCaller] : []), ...afterLimit);
    if (route.beforeBody) chain.push(route.beforeBody);
    chain.push(refuseNulInUrl, refuseUnknownQuery(`${route.method.toUpperCase()} ${toOpenApiPath(route.path)}`, route.query));
    if (route.method !== 'get') chain.push(...body);
    if (route.limitedBody) chain.push(...(byCaller ? [limitedBy(byCaller, route.limitedBody)] : []), ...afterLimit);
    // After the body: a client that sends its body slowly holds no place at the gate meanwhile.
    if (route.heavyRead) {
      if (route.auth === 'none') throw new Error(`${route.method.toUpperCase()} ${route.path}: a heavy read is keyed (the gate takes turns by caller)`);
      chain.push(gatedBy(recordReads));
    }
    chain.push(async (req: Request, res: Response) => {
      await handlers.track(() => route.handler(req, res));
    });
    app[route.method](route.path, ...chain);
  }

  if (options.observer) {
    const observer = options.observer;
    app.use((req: Request, res: Response, next: NextFunction) => observeAnswers(observer, req.method.toLowerCase(), 'unmatched')(req, res, next));
  }
  // A path that is mounted, asked with a method it does not take: 405 with the methods it takes
  // (RFC 9110 15.5.6), not 404. (The MCP transport's GET and DELETE of /mcp are answered so too, as
  // its specification asks of a server that offers no stream and no session.)
  const methodsByPath = new Map<string, Set<string>>();
  for (const r of table.routes) methodsByPath.set(r.path, (methodsByPath.get(r.path) ?? new Set()).add(r.method.toUpperCase()));
  for (const [path, methods] of methodsByPath) {
    if (methods.has('GET')) methods.add('HEAD');
    const allow = [...methods].sort().join(', ');
    app.all(path, (req: Request, res: Response) => {
      res.setHeader('Allow', allow);
      res.status(405).json({ error: `${req.method} is not allowed on ${toOpenApiPath(path)}; it takes ${allow}.` });
    });
  }
  app.use((_req: Request, _res: Response, next: NextFunction) => next(new DomainError('not_found', 'Not found.')));
  app.use(errorHandler(options.logger));
  return {
    app,
    routes: table.routes,
    recordReads,
    inFlight: () => handlers.count,
    idle: () => handlers.idle(),
    closeConnectionsAfterAnswers: () => {
      closing = true;
    },
  };
}

/** The per-caller limiter run once per unit the body asks for (RouteOptions.limitedBody); the first refusal answers. */
function limitedBy(limiter: RequestHandler, units: (body: unknown) => number): RequestHandler {
  return async (req, res, next) => {
    const count = units(req.body);
    for (let i = 0; i < count; i++) {
      const refused = await new Promise<unknown>((resolve) => void limiter(req, res, (err?: unknown) => resolve(err ?? undefined)));
      if (refused !== undefined) return next(refused);
    }
    next();
  };
}

/** Counts running handlers; a handler goes on after its client went away, and so must the database. */
class InFlight {
  count = 0;
  private waiters: (() => void)[] = [];

  async track(fn: () => unknown): Promise<void> {
    this.count++;
    try {
      await fn();
    } finally {
      if (--this.count === 0) for (const w of this.waiters.splice(0)) w();
    }
  }

  idle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}

function setErrorShape(route: RouteSpec): RequestHandler {
  return (_req, res, next) => {
    res.locals.errorShape = route.errorShape ?? 'envelope';
    next();
  };
}

import type { Request, Response } from 'express';

/**
 * Routes are declared through this table rather than on Express directly, so that authentication,
 * rate limiting and body parsing are applied in one order for all of them, and so that the OpenAPI
 * document can be checked against exactly what is mounted.
 */
/** `simple-key`: the attestation-simple profile's SVC_API_KEY when it is set, else none (spec 5.5). */
export type AuthMode = 'none' | 'key' | 'simple-key';
export type LimiterName = 'health' | 'public' | 'execute';
export type Method = 'get' | 'post' | 'put' | 'delete';
export type Handler = (req: Request, res: Response) => unknown;

export interface RouteOptions {
  auth: AuthMode;
  /**
   * The query parameters the route reads. Any other name in the query string is 400, on every
   * route (a route without this list knows none), before the handler runs: a misspelt or
   * unsupported parameter is never silently ignored. The OpenAPI document lists the same names
   * (`in: query`); a test holds the two equal, route by route, in every profile.
   */
  query?: readonly string[];
  /** Rate limiter applied before anything else (spec 8). */
  limiter?: LimiterName;
  /**
   * How errors of this route are rendered. `validation` is spec 2.1's exception for
   * `POST /policies/validate`: every status but 401 answers `{valid:false, errors}`.
   */
  errorShape?: 'envelope' | 'validation';
  /**
   * The route reads whole signed records of unbounded size (Trust Records), to send them or to
   * parse, hash, check or sign over them: it waits for a place at the process's record-read gate
   * (read-gate.ts) after authentication and, for a route with a body, after the body is read.
   */
  heavyRead?: true;
  /**
   * The successful authentication's signed event is not stored before the handler runs: it is put
   * in `res.locals.pendingAudit` for the handler to hand to the execution pipeline, whose first
   * commit stores it with the request's record, and the handler settles it (stores it if nothing
   * did) before it answers. One durable commit instead of two on the hot path; never an answer, and
   * never a release, before the event is stored.
   */
  auditInPipeline?: true;
  /**
   * `false`: a successful authentication of this route is not recorded as a signed audit event.
   * For the dry runs of profile A (`/evaluate`, `/simulate`), which write nothing at all (spec 6).
   * A failed authentication is audited as on every keyed route.
   */
  audit?: false;
  /**
   * The route's per-caller limit counts what the body asks for rather than the request (MCP: one
   * per `tools/call` in the message, none for `tools/list`), so the limiter runs after the body is
   * read, as many times as this says, and the authentication's audit after it: a request the
   * limiter refuses is still never audited as served.
   */
  limitedBody?: (body: unknown) => number;
  /** A check of the route's own after authentication, before the body is read (MCP: the Origin header). */
  beforeBody?: (req: Request, res: Response, next: (err?: unknown) => void) => void;
}

export interface RouteSpec extends RouteOptions {
  method: Method;
  path: string;
  handler: Handler;
}

export class RouteTable {
  readonly routes: RouteSpec[] = [];

  get(path: string, options: RouteOptions, handler: Handler): this {
    return this.add('get', path, options, handler);
  }

  post(path: string, options: RouteOptions, handler: Handler): this {
    return this.add('post', path, options, handler);
  }

  delete(path: string, options: RouteOptions, handler: Handler): this {
    return this.add('delete', path, options, handler);
  }

  private add(method: Method, path: string, options: RouteOptions, handler: Handler): this {
    this.routes.push({ method, path, handler, ...options });
    return this;
  }
}

export type RouteModule = (table: RouteTable) => void;

/**
 * A module without some of its routes (`'post /execute'`), for the profile that mounts its own
 * shape of them (CONTRACT "Profiles": `/execute`, `/verify` and `/health` take the configured
 * profile's shape).
 */
export const excluding =
  (module: RouteModule, ...routes: string[]): RouteModule =>
  (t) => {
    const kept = new RouteTable();
    module(kept);
    for (const r of kept.routes) if (!routes.includes(`${r.method} ${r.path}`)) t.routes.push(r);
  };

/** `/keys/:keyId` → `/keys/{keyId}` */
export const toOpenApiPath = (expressPath: string): string => expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

import type { Request, Response } from 'express';

/**
 * Routes are declared through this table rather than on Express directly, so that authentication,
 * rate limiting and body parsing are applied in one order for all of them, and so that the OpenAPI
 * document can be checked against exactly what is mounted.
 */
export type AuthMode = 'none' | 'key';
export type LimiterName = 'health' | 'public' | 'execute';
export type Method = 'get' | 'post' | 'put' | 'delete';
export type Handler = (req: Request, res: Response) => unknown;

export interface RouteOptions {
  auth: AuthMode;
  /** Rate limiter applied before anything else (spec 8). */
  limiter?: LimiterName;
  /**
   * How errors of this route are rendered. `validation` is spec 2.1's exception for
   * `POST /policies/validate`: every status but 401 answers `{valid:false, errors}`.
   */
  errorShape?: 'envelope' | 'validation';
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

  private add(method: Method, path: string, options: RouteOptions, handler: Handler): this {
    this.routes.push({ method, path, handler, ...options });
    return this;
  }
}

export type RouteModule = (table: RouteTable) => void;

/** `/keys/:keyId` → `/keys/{keyId}` */
export const toOpenApiPath = (expressPath: string): string => expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { invalid } from '@ets/domain';

/** A string, or any key or string inside arrays and objects, that holds U+0000. */
const holdsNul = (v: unknown): boolean =>
  typeof v === 'string'
    ? v.includes('\u0000')
    : Array.isArray(v)
      ? v.some(holdsNul)
      : v !== null && typeof v === 'object' && Object.entries(v).some(([k, x]) => k.includes('\u0000') || holdsNul(x));

/**
 * The URL half of the input rule the body reader applies to bodies (strict JSON): no decoded path
 * parameter or query value (`%00`) holds U+0000, which no id, name or version needs and
 * PostgreSQL text cannot hold. 400 on every route and every store alike, before any handler.
 */
export function refuseNulInUrl(req: Request, _res: Response, next: NextFunction): void {
  const param = Object.entries(req.params ?? {}).find(([, v]) => holdsNul(v));
  if (param) return next(invalid(`The path parameter '${param[0]}' must not hold U+0000.`));
  if (holdsNul(req.query)) return next(invalid('The query string must not hold U+0000.'));
  next();
}

/** A name as the client sent it, quoted and cut short: it is the client's input, echoed back. */
const shown = (name: string): string => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);

/**
 * The route's declared query parameters (`RouteOptions.query`) and no other: an unknown name is
 * 400 naming it and listing the known ones, so that a client never reads an answer that silently
 * ignored what it asked for (`?pageSize=5` on a route that does not page).
 */
export function refuseUnknownQuery(route: string, known: readonly string[] = []): RequestHandler {
  const knows = new Set(known);
  const takes = known.length === 0 ? 'takes no query parameter' : `takes only ${known.join(', ')}`;
  return (req, _res, next) => {
    const unknown = Object.keys(req.query ?? {}).find((name) => !knows.has(name));
    if (unknown === undefined) return next();
    next(invalid(`Unknown query parameter ${shown(unknown)}: ${route} ${takes}.`));
  };
}

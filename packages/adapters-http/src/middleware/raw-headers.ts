import type { Request } from 'express';

/**
 * How many times the request sends the header `name` (lower case). Node keeps only the first of
 * several in `req.headers`, and a proxy may keep the last: a header whose meaning must not depend
 * on that is refused when sent more than once.
 */
export function headerCount(req: Request, name: string): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === name) count++;
  return count;
}

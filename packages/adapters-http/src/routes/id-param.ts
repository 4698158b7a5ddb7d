import type { Request } from 'express';

/** The `:id` path parameter of a record route, lower-cased: ids are stored lower-case (UUIDs). */
export const idParam = (req: Request): string => String(req.params.id).toLowerCase();

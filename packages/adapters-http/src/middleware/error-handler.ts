import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@ets/domain';
import { fromFrameworkError, INTERNAL_ERROR, toEnvelope } from '../http-errors.js';

/**
 * The one place errors become responses: the envelope of spec 2.1 and nothing else. An unknown
 * failure is 500 with a correlation id that is written to the log only, never to the client; a
 * 503 is logged as a warning with its cause.
 */
export function errorHandler(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const log: Logger = (res.locals.log as Logger | undefined) ?? logger;
    const known = fromFrameworkError(err);
    if (res.headersSent) {
      log.error({ err: describe(err) }, 'error after response started');
      res.end();
      return;
    }
    if (!known) {
      const correlationId = randomUUID();
      log.error({ correlationId, method: req.method, path: req.path, err: describe(err) }, 'unhandled failure');
      res.status(500).json({ error: INTERNAL_ERROR });
      return;
    }
    // What the client is told is generic; what the operator needs (which pool, which server, what
    // failed) is the cause, written to the log only.
    if (known.kind === 'unavailable') {
      log.warn({ method: req.method, path: req.path, code: known.code, cause: known.cause === undefined ? undefined : describe(known.cause) }, 'service unavailable');
    }
    const { status, body } = toEnvelope(known);
    if (res.locals.errorShape === 'validation' && status !== 401) {
      res.status(status).json({ valid: false, errors: [body.error] });
      return;
    }
    res.status(status).json(body);
  };
}

/** Name, message and stack of an error; never the request that caused it. */
function describe(err: unknown): object {
  if (err instanceof Error) return { name: err.name, message: err.message, stack: err.stack };
  return { value: String(err) };
}

import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@ets/domain';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * A request id per request (a sane incoming X-Request-Id is kept, to follow a call across
 * services), and one structured log line when the response is done. Only method, route, status
 * and timing are logged: never headers or bodies, which carry keys and business data.
 */
export function requestContext(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.locals.log = logger.child({ requestId });
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      (res.locals.log as Logger).info(
        { method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 100) / 100, callerId: res.locals.caller?.callerId },
        'request',
      );
    });
    next();
  };
}

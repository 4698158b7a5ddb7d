import express, { type NextFunction, type Request, type Response } from 'express';
import { DomainError } from '@ets/domain';
import { DuplicateKeyError, JsonSyntaxError, parseStrictJson, UnrepresentableJsonError } from '../json/strict-json.js';

/**
 * Reads the body as bytes (bounded by the limit: over it is 413) and parses it as strict JSON:
 * malformed JSON and duplicate keys are 400. Runs after authentication, so an unauthenticated
 * request never has its body read or parsed (spec 5.2).
 */
export function jsonBody(limitBytes: number) {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  return [
    raw,
    (req: Request, _res: Response, next: NextFunction): void => {
      const buf = req.body as unknown;
      if (!Buffer.isBuffer(buf) || buf.length === 0) {
        req.body = undefined;
        return next();
      }
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(buf);
      } catch {
        return next(new DomainError('invalid', 'Request body is not valid UTF-8.'));
      }
      try {
        req.body = parseStrictJson(text);
      } catch (e) {
        if (e instanceof DuplicateKeyError) {
          return next(new DomainError('invalid', `Request body is ambiguous: ${e.message}`));
        }
        if (e instanceof JsonSyntaxError) return next(new DomainError('invalid', 'Request body is not valid JSON.'));
        if (e instanceof UnrepresentableJsonError) return next(new DomainError('invalid', `Request body cannot be processed: ${e.message}.`));
        if (e instanceof RangeError) return next(new DomainError('invalid', 'Request body cannot be processed: it is nested too deeply.'));
        return next(e);
      }
      next();
    },
  ];
}

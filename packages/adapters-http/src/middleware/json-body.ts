import express, { type NextFunction, type Request, type Response } from 'express';
import { parse as parseContentType } from 'content-type';
import { DomainError } from '@ets/domain';
import { DuplicateKeyError, JsonSyntaxError, parseStrictJson, UnrepresentableJsonError } from '../json/strict-json.js';
import { headerCount } from './raw-headers.js';

/** The content codings a body may arrive in (CONTRACT "Requests, reads and lists"). */
export const ACCEPTED_CONTENT_CODINGS = ['identity', 'gzip', 'deflate', 'br'] as const;

export const UNSUPPORTED_MEDIA_TYPE_MESSAGE = 'Request body must be JSON: Content-Type application/json (charset=utf-8, if any).';

/**
 * The one body reader of every route that takes a body (public ones too), after authentication so
 * that an unauthenticated request never has its body read (spec 5.2):
 *
 * 1. the content type must be `application/json`, with no parameter but `charset=utf-8`, in one
 *    `Content-Type` header: else 415;
 * 2. the content coding must be one of `ACCEPTED_CONTENT_CODINGS`: else 400;
 * 3. the bytes are read and inflated, bounded by the limit after inflation (413); a body that does
 *    not decode as its coding says (a plain body labelled gzip, a truncated or garbage stream) or
 *    that arrives incomplete is 400, never 500;
 * 4. the text must be UTF-8 and strict JSON (see `parseStrictJson`): else 400.
 */
export function jsonBody(limitBytes: number) {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  return [
    (req: Request, _res: Response, next: NextFunction): void => next(contentTypeProblem(req) ?? contentCodingProblem(req)),
    (req: Request, res: Response, next: NextFunction): void => {
      void raw(req, res, (err?: unknown) => next(err === undefined ? undefined : bodyReadError(err, req)));
    },
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

/** A request carries a body when it says so (a length above 0, or chunks). */
const carriesBody = (req: Request): boolean =>
  req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

function contentTypeProblem(req: Request): DomainError | undefined {
  const header = req.headers['content-type'];
  if (header === undefined) return carriesBody(req) ? unsupportedMediaType() : undefined;
  // How the body is read must not depend on which of several Content-Type headers is kept: more
  // than one is refused, as two `Authorization` headers are (presentedKey).
  if (headerCount(req, 'content-type') > 1) return unsupportedMediaType();
  let type: string;
  let parameters: Record<string, string>;
  try {
    ({ type, parameters } = parseContentType(header));
  } catch {
    return unsupportedMediaType();
  }
  if (type.toLowerCase() !== 'application/json') return unsupportedMediaType();
  for (const [name, value] of Object.entries(parameters)) {
    if (name.toLowerCase() !== 'charset' || value.toLowerCase() !== 'utf-8') return unsupportedMediaType();
  }
  return undefined;
}

const unsupportedMediaType = (): DomainError => new DomainError('unsupported_media_type', UNSUPPORTED_MEDIA_TYPE_MESSAGE);

/** The coding named by Content-Encoding (one coding; `identity` when absent). */
const contentCoding = (req: Request): string => (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase() || 'identity';

function contentCodingProblem(req: Request): DomainError | undefined {
  const coding = contentCoding(req);
  if ((ACCEPTED_CONTENT_CODINGS as readonly string[]).includes(coding)) return undefined;
  return new DomainError('invalid', `Content-Encoding '${printable(coding)}' is not accepted; send ${ACCEPTED_CONTENT_CODINGS.join(', ')}.`);
}

/** Every way reading the body can fail, as the client's error: 413 over the limit, else 400. */
function bodyReadError(err: unknown, req: Request): DomainError {
  const type = (err as { type?: unknown } | undefined)?.type;
  if (type === 'entity.too.large') return new DomainError('payload_too_large', 'Request body is too large.');
  if (type === 'request.aborted') return new DomainError('invalid', 'Request body was not received completely.');
  const coding = contentCoding(req);
  if (coding !== 'identity') return new DomainError('invalid', `Request body does not decode as its Content-Encoding '${coding}' says.`);
  if (type === 'request.size.invalid') return new DomainError('invalid', 'Request body length does not match Content-Length.');
  return new DomainError('invalid', 'Request body could not be read.');
}

/** A header value in a message: visible ASCII only, at most 40 characters. */
const printable = (s: string): string => s.replace(/[^\x20-\x7e]/g, '?').slice(0, 40);

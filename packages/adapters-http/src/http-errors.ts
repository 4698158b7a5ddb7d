import { DomainError, type ErrorKind } from '@ets/domain';

/** The one table from domain error kind to HTTP status. */
export const STATUS_BY_KIND: Record<ErrorKind, number> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  unprocessable: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  unavailable: 503,
  bad_gateway: 502,
  internal: 500,
};

export interface ErrorEnvelope {
  error: string;
  code?: string;
  [extra: string]: string | undefined;
}

export const AUTHENTICATION_REQUIRED = 'authentication required';
export const INTERNAL_ERROR = 'Internal Server Error';

/**
 * Errors that reach the central handler from Express itself (routing, and the body reader should
 * it let one through). Every client error among them (4xx) is the client's, not a 500: a path
 * parameter that does not percent-decode as UTF-8 is the one routing raises.
 */
export function fromFrameworkError(err: unknown): DomainError | undefined {
  if (err instanceof DomainError) return err;
  const e = err as { type?: string; status?: number; statusCode?: number } | undefined;
  const status = e?.status ?? e?.statusCode;
  if (e?.type === 'entity.too.large' || status === 413) {
    return new DomainError('payload_too_large', 'Request body is too large.');
  }
  if (err instanceof URIError) return new DomainError('invalid', 'The request path is not valid percent-encoded UTF-8.');
  if (typeof status === 'number' && status >= 400 && status < 500) return new DomainError('invalid', 'The request could not be read.');
  return undefined;
}

export function toEnvelope(err: DomainError): { status: number; body: ErrorEnvelope } {
  const body: ErrorEnvelope = { error: err.message };
  if (err.code) body.code = err.code;
  if (err.extra) Object.assign(body, err.extra);
  return { status: STATUS_BY_KIND[err.kind], body };
}

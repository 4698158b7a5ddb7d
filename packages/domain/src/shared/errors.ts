/**
 * Domain errors are values with a stable shape. `kind` says what class of failure it is (the HTTP
 * adapter maps it to a status in one table); `code` is the stable machine-readable code that the
 * interface exposes. Spec 2.1: validation, not-found and duplicate errors carry no code, so
 * `code` is optional and omitted for them.
 */
export type ErrorKind =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'unprocessable'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'unavailable'
  | 'bad_gateway'
  | 'internal';

export type ErrorCode =
  | 'POLICY_DENIED'
  | 'TENANT_NOT_ALLOWED'
  | 'CAPABILITY_NOT_ALLOWED'
  | 'NON_HUMAN_CALLER_DENIED'
  | 'CONNECTOR_NOT_REGISTERED'
  | 'RATE_LIMITED'
  | 'AUDIT_UNAVAILABLE'
  | 'STORAGE_UNAVAILABLE'
  | 'SIGNING_UNAVAILABLE'
  | 'RUNTIME_ERROR'
  | 'VERIFICATION_FAILED'
  | 'RECEIPT_GENERATION_FAILED'
  | 'AUTHORIZATION_NO_LONGER_VALID'
  | 'EXECUTION_OUTCOME_UNKNOWN'
  | 'EXECUTION_RECORD_INCOMPLETE'
  | 'EXECUTION_INTENT_UNAVAILABLE'
  | 'EXECUTION_INTENT_RESULT_NOT_RECORDED'
  | 'EXECUTION_INTENT_NOT_FOUND'
  | 'EXECUTION_INTENTS_NOT_ENABLED'
  | 'EXECUTION_INTENT_NOT_RESOLVABLE'
  | 'EXECUTION_INTENT_RESOLUTION_INVALID'
  | 'NONCE_ALREADY_CONSUMED'
  | 'STEP_UP_REQUIRED'
  | 'STEP_UP_INVALID'
  | 'STEP_UP_EXPIRED'
  | 'STEP_UP_NONCE_REUSED'
  | 'SELF_APPROVAL_DENIED'
  | 'CHANGE_ALREADY_DECIDED'
  | 'CHANGE_NOT_FOUND'
  | 'EXECUTION_ID_REPLAYED'
  | 'NO_MATCHING_RULE'
  | 'INVARIANT_VIOLATION'
  | 'APPROVAL_INVALID'
  | 'SELF_GRANT_DENIED'
  | 'CSRF_TOKEN_INVALID';

export class DomainError extends Error {
  override readonly name = 'DomainError';
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly code?: ErrorCode,
    /** Extra top-level response fields the spec requires beside the envelope (e.g. executionStatus). */
    readonly extra?: Readonly<Record<string, string>>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const invalid = (message: string): DomainError => new DomainError('invalid', message);
export const notFound = (message: string, code?: ErrorCode): DomainError =>
  new DomainError('not_found', message, code);
export const conflict = (message: string, code?: ErrorCode): DomainError =>
  new DomainError('conflict', message, code);
export const forbidden = (message: string, code?: ErrorCode): DomainError =>
  new DomainError('forbidden', message, code);

export const isDomainError = (e: unknown): e is DomainError => e instanceof DomainError;

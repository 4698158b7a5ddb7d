import { DomainError } from './errors.js';

export const AUDIT_UNAVAILABLE_MESSAGE = 'Audit log is unavailable; the request was not processed.';

/** Runs an audit write; a failure is 503 AUDIT_UNAVAILABLE (auditing fails closed). */
export async function audited<T>(write: () => Promise<T>, message = AUDIT_UNAVAILABLE_MESSAGE): Promise<T> {
  try {
    return await write();
  } catch (cause) {
    if (cause instanceof DomainError) throw cause;
    throw new DomainError('unavailable', message, 'AUDIT_UNAVAILABLE', undefined, { cause });
  }
}

/** Runs a signing; a failure is 503 SIGNING_UNAVAILABLE, before anything was stored. */
export async function signed<T>(sign: () => Promise<T>, message = 'Signing is unavailable; nothing was stored.'): Promise<T> {
  try {
    return await sign();
  } catch (cause) {
    throw new DomainError('unavailable', message, 'SIGNING_UNAVAILABLE', undefined, { cause });
  }
}

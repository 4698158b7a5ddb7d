import { isObject } from './fields.js';
import { detectKind } from './verify-offline.js';

/**
 * Response members that hold a signed object, in the order they are preferred:
 * `POST /execute` and `POST /transactions` (`trustRecord`), `GET /execution-intents/{id}`
 * (`{intent, status}`), `GET /transactions/{id}` (`trustRecord`, `refusal`), the attestation
 * profile's execute response (`attestation`), and wrappers named after their content.
 */
const WRAPPER_MEMBERS = ['trustRecord', 'intent', 'refusal', 'attestation', 'verification', 'receipt', 'event'] as const;

export interface UnwrappedRecord {
  /** The signed object to verify (the input itself when it is one). */
  record: unknown;
  /** The member it was taken from, when the input was a response wrapping it. */
  from?: string;
}

/**
 * Takes a signed object out of an API response that wraps it. A value that is itself a signed
 * object of a known kind is returned as it is, and so is anything that wraps none.
 */
export function unwrapServedRecord(value: unknown): UnwrappedRecord {
  if (!isObject(value) || detectKind(value) !== 'unknown') return { record: value };
  for (const member of WRAPPER_MEMBERS) {
    const inner = Object.prototype.hasOwnProperty.call(value, member) ? value[member] : undefined;
    if (isObject(inner) && detectKind(inner) !== 'unknown') return { record: inner, from: member };
  }
  return { record: value };
}

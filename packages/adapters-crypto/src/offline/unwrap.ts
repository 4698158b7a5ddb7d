import { isObject } from './fields.js';
import { detectKind } from './verify-offline.js';

/**
 * Response members that hold a signed object, in the order they are preferred:
 * `POST /execute` and `POST /transactions` (`trustRecord`), `GET /execution-intents/{id}`
 * (`{intent, status}`), `GET /transactions/{id}` (`trustRecord`, `refusal`), the attestation
 * profile's execute response (`attestation`), its override response (`resolution`), its
 * `POST /confirm-execution` response (`proof`, a compact JWS), wrappers named after their content,
 * and `record` (an export entry: `{ record, transparency }`).
 */
const WRAPPER_MEMBERS = ['trustRecord', 'intent', 'refusal', 'attestation', 'resolution', 'proof', 'verification', 'receipt', 'event', 'record'] as const;

export interface UnwrappedRecord {
  /** The signed object to verify (the input itself when it is one). */
  record: unknown;
  /** The member it was taken from, when the input was a response wrapping it. */
  from?: string;
  /** The wrapper's `transparency` member: the record's own inclusion proof (see `verifyOffline` options). */
  transparency?: unknown;
}

/**
 * Takes a signed object out of an API response that wraps it. A value that is itself a signed
 * object of a known kind is returned as it is, and so is anything that wraps none.
 */
export function unwrapServedRecord(value: unknown): UnwrappedRecord {
  if (!isObject(value) || detectKind(value) !== 'unknown') return { record: value };
  // `GET /runtime/manifest` serves the manifest's fields beside manifestHash and manifestSignature:
  // the signed runtime manifest (as stored and logged) is `{manifest, manifestHash, manifestSignature}`.
  if (value.manifestType === 'runtime-manifest' && typeof value.manifestHash === 'string' && !('manifest' in value)) {
    const { manifestHash, manifestSignature, ...manifest } = value;
    return { record: { manifest, manifestHash, manifestSignature } };
  }
  for (const member of WRAPPER_MEMBERS) {
    const inner = Object.prototype.hasOwnProperty.call(value, member) ? value[member] : undefined;
    // A signed object, or a confirmation proof: a compact JWS string.
    if (detectKind(inner) !== 'unknown') {
      return value.transparency === undefined ? { record: inner, from: member } : { record: inner, from: member, transparency: value.transparency };
    }
  }
  return { record: value };
}

/**
 * Offline verification of signed records against a JWKS. Needs nothing but the record and the
 * public keys (no server, no database), so the CLI `ets verify`, the public /verify routes and
 * third parties all run the same checks. The primitives come from the caller (`VerifyCrypto`):
 * Node's in the service (node-verifier.ts), @noble's in a browser; this module uses no Node API.
 *
 * Error strings name the field and the check that failed ("signature: does not verify"); they
 * never include exception text from the crypto layer.
 */
import type { SignatureFields, SignatureVerifier } from '@ets/domain';
import { canonicalize } from './canonical-json.js';
import type { JwksLike } from './jwk.js';
import { ML_DSA_65_PUBLIC_KEY_BYTES, ML_DSA_65_SIGNATURE_BYTES } from './ml-dsa65-noble.js';
import { fromBase64, fromBase64Url, utf8 } from './transparency/bytes.js';
import type { VerifyCrypto, VerifyFn } from './verify-crypto.js';

export interface OfflineVerification {
  valid: boolean;
  /** The record's `keyId`, when it has one. */
  keyId?: string;
  errors: string[];
}

type Alg = 'Ed25519' | 'ML-DSA-65';
type Verify = VerifyFn;
/** A usable verify function, or the reason the key cannot be used. */
type Resolved = { verify: Verify } | { problem: string };
type Resolver = (kid: string, alg: Alg) => Resolved;

const ED25519_SIGNATURE_BYTES = 64;
const ED25519_PUBLIC_KEY_BYTES = 32;

/** Verifies a signed record (`keyId`, `signature`, and in hybrid mode `pqKeyId`, `pqSignature`). */
export function verifyRecord(record: unknown, jwks: JwksLike, crypto: VerifyCrypto): OfflineVerification {
  return verifyRecordWith(record, jwksResolver(jwks, crypto));
}

/** Verifies signature fields made over a detached UTF-8 string (the execution chain). */
export function verifyDetached(text: string, sig: SignatureFields, jwks: JwksLike, crypto: VerifyCrypto): OfflineVerification {
  return verifyDetachedWith(text, sig, jwksResolver(jwks, crypto));
}

/** The domain's SignatureVerifier over a key set, keeping imported keys between calls. */
export class JwksSignatureVerifier implements SignatureVerifier {
  readonly #source: () => JwksLike;
  readonly #crypto: VerifyCrypto;
  #cachedFor: JwksLike | undefined;
  #cache = new Map<string, Resolved>();

  /**
   * `keys` may be a fixed JWKS, a function returning the current one, or an object with a
   * `jwks()` method (the KeyRing). The cache is dropped whenever a different JWKS object comes
   * back, which is how the KeyRing signals a rotation.
   */
  constructor(keys: JwksLike | (() => JwksLike) | { jwks(): JwksLike }, crypto: VerifyCrypto) {
    this.#crypto = crypto;
    if (typeof keys === 'function') this.#source = keys;
    else if (Array.isArray((keys as Partial<JwksLike>).keys)) this.#source = () => keys as JwksLike;
    else this.#source = () => (keys as { jwks(): JwksLike }).jwks();
  }

  verify(record: unknown): OfflineVerification {
    return verifyRecordWith(record, this.#resolver());
  }

  verifyText(text: string, sig: SignatureFields): OfflineVerification {
    return verifyDetachedWith(text, sig, this.#resolver());
  }

  #resolver(): Resolver {
    const jwks = this.#source();
    if (jwks !== this.#cachedFor) {
      this.#cachedFor = jwks;
      this.#cache = new Map();
    }
    const uncached = jwksResolver(jwks, this.#crypto);
    const cache = this.#cache;
    return (kid, alg) => {
      const cacheKey = `${alg}\u0000${kid}`;
      let resolved = cache.get(cacheKey);
      if (!resolved) {
        resolved = uncached(kid, alg);
        if (cache.size < 1024) cache.set(cacheKey, resolved);
      }
      return resolved;
    };
  }
}

function verifyRecordWith(record: unknown, resolve: Resolver): OfflineVerification {
  if (typeof record !== 'object' || record === null || Array.isArray(record)) {
    return { valid: false, errors: ['record: not a JSON object'] };
  }
  return check(record as Record<string, unknown>, resolve, () => {
    // Spread keeps an own `__proto__` key as data, so it stays covered by the signature.
    const payload: Record<string, unknown> = { ...(record as Record<string, unknown>) };
    delete payload.signature;
    delete payload.pqSignature;
    return utf8(canonicalize(payload));
  });
}

function verifyDetachedWith(text: unknown, sig: unknown, resolve: Resolver): OfflineVerification {
  if (typeof sig !== 'object' || sig === null || Array.isArray(sig)) {
    return { valid: false, errors: ['signature fields: not an object'] };
  }
  if (typeof text !== 'string') {
    const fields = sig as Record<string, unknown>;
    return { valid: false, ...keyIdOf(fields), errors: ['text: not a string'] };
  }
  return check(sig as Record<string, unknown>, resolve, () => utf8(text));
}

function check(fields: Record<string, unknown>, resolve: Resolver, signedBytes: () => Uint8Array): OfflineVerification {
  const errors: string[] = [];
  const pending: Array<{ field: string; verify: Verify; signature: Uint8Array }> = [];

  const edKey = resolveKey(fields, 'keyId', 'Ed25519', resolve, errors);
  const edSig = signatureField(fields, 'signature', ED25519_SIGNATURE_BYTES, errors);
  if (edKey && edSig) pending.push({ field: 'signature', verify: edKey, signature: edSig });

  // Hybrid records must carry both post-quantum fields; one without the other is a stripped or
  // forged record, never a valid Ed25519-only one.
  if (fields.pqKeyId !== undefined || fields.pqSignature !== undefined) {
    const pqKey = resolveKey(fields, 'pqKeyId', 'ML-DSA-65', resolve, errors);
    const pqSig = signatureField(fields, 'pqSignature', ML_DSA_65_SIGNATURE_BYTES, errors);
    if (pqKey && pqSig) pending.push({ field: 'pqSignature', verify: pqKey, signature: pqSig });
  }

  if (pending.length > 0) {
    let data: Uint8Array | undefined;
    try {
      data = signedBytes();
    } catch {
      errors.push('record: cannot be canonicalized (RFC 8785)');
    }
    if (data) {
      for (const { field, verify, signature } of pending) {
        if (!verify(data, signature)) errors.push(`${field}: does not verify`);
      }
    }
  }
  return { valid: errors.length === 0, ...keyIdOf(fields), errors };
}

function keyIdOf(fields: Record<string, unknown>): { keyId?: string } {
  return typeof fields.keyId === 'string' ? { keyId: fields.keyId } : {};
}

function resolveKey(
  fields: Record<string, unknown>,
  name: string,
  alg: Alg,
  resolve: Resolver,
  errors: string[],
): Verify | undefined {
  const kid = fields[name];
  if (kid === undefined) errors.push(`${name}: missing`);
  else if (typeof kid !== 'string' || kid.length === 0) errors.push(`${name}: not a non-empty string`);
  else {
    const resolved = resolve(kid, alg);
    if ('verify' in resolved) return resolved.verify;
    errors.push(`${name}: ${resolved.problem}`);
  }
  return undefined;
}

function signatureField(fields: Record<string, unknown>, name: string, length: number, errors: string[]): Uint8Array | undefined {
  const value = fields[name];
  if (value === undefined) {
    errors.push(`${name}: missing`);
    return undefined;
  }
  const bytes = fromBase64(value);
  if (!bytes) errors.push(`${name}: not standard base64`);
  else if (bytes.length !== length) errors.push(`${name}: wrong length`);
  else return bytes;
  return undefined;
}

function jwksResolver(jwks: JwksLike, crypto: VerifyCrypto): Resolver {
  const keys: readonly unknown[] = jwks && Array.isArray(jwks.keys) ? jwks.keys : [];
  return (kid, alg) => {
    let sawOtherType = false;
    for (const candidate of keys) {
      if (typeof candidate !== 'object' || candidate === null) continue;
      const jwk = candidate as Record<string, unknown>;
      if (jwk.kid !== kid) continue;
      if (alg === 'Ed25519' && jwk.kty === 'OKP' && jwk.crv === 'Ed25519') return importEd25519(jwk, kid, crypto);
      if (alg === 'ML-DSA-65' && jwk.kty === 'AKP' && jwk.alg === 'ML-DSA-65') return importMlDsa65(jwk, kid, crypto);
      sawOtherType = true;
    }
    return sawOtherType ? { problem: `key ${kid} is not an ${alg} key` } : { problem: `unknown key ${kid}` };
  };
}

// Not cached here: a VerifyCrypto keeps the verifier it made for each public key (perKey), for
// every caller, so a freshly parsed JWKS (CLI, public /verify routes) skips the import anyway.
function importEd25519(jwk: Record<string, unknown>, kid: string, crypto: VerifyCrypto): Resolved {
  const x = jwk.x;
  const bytes = fromBase64Url(x);
  if (typeof x !== 'string' || !bytes || bytes.length !== ED25519_PUBLIC_KEY_BYTES || (jwk.alg !== undefined && jwk.alg !== 'EdDSA')) {
    return { problem: `published key ${kid} is malformed` };
  }
  try {
    return { verify: crypto.ed25519(bytes) };
  } catch {
    return { problem: `published key ${kid} is malformed` };
  }
}

function importMlDsa65(jwk: Record<string, unknown>, kid: string, crypto: VerifyCrypto): Resolved {
  const pub = jwk.pub;
  const bytes = fromBase64Url(pub);
  if (typeof pub !== 'string' || !bytes || bytes.length !== ML_DSA_65_PUBLIC_KEY_BYTES) {
    return { problem: `published key ${kid} is malformed` };
  }
  try {
    return { verify: crypto.mlDsa65(bytes) };
  } catch {
    return { problem: `published key ${kid} is malformed` };
  }
}

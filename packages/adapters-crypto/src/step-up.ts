/**
 * Step-up envelopes (spec 2.6): a checker signs the canonical JSON of the payload with their own
 * Ed25519 key; the server holds only the registered public key PEM.
 */
import type { StepUpSignatureVerifier } from '@ets/domain';
import { createPrivateKey, createPublicKey, sign as nodeSign, type KeyObject } from 'node:crypto';
import { decodeBase64Strict } from './base64.js';
import { canonicalize } from './canonical-json.js';
import { nodeVerifyCrypto } from './node-verify-crypto.js';

const PUBLIC_KEY_PEM = /^\s*-----BEGIN PUBLIC KEY-----\r?\n[A-Za-z0-9+/=\r\n]+-----END PUBLIC KEY-----\s*$/;

/**
 * True for an Ed25519 public key in SPKI PEM form. Checked on the text first because
 * createPublicKey also accepts a private key PEM (and derives its public half), and a private
 * key pasted by mistake must be rejected, not stored.
 */
export function isEd25519PublicKeyPem(pem: unknown): boolean {
  return parseEd25519PublicKeyPem(pem) !== undefined;
}

/** The raw public key (base64url, the JWK `x`) of an Ed25519 public key in SPKI PEM form. */
export function parseEd25519PublicKeyPem(pem: unknown): string | undefined {
  if (typeof pem !== 'string' || !PUBLIC_KEY_PEM.test(pem)) return undefined;
  try {
    const key = createPublicKey({ key: pem.trim(), format: 'pem' });
    if (key.type !== 'public' || key.asymmetricKeyType !== 'ed25519') return undefined;
    const { x } = key.export({ format: 'jwk' });
    return typeof x === 'string' ? x : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Verifies with the records' own Ed25519 verifier, which keeps the imported key per raw key and
 * refuses small-order keys (under which OpenSSL accepts a signature anyone can make).
 */
export class Ed25519StepUpVerifier implements StepUpSignatureVerifier {
  // Checkers are few and approve repeatedly (signed approvals ride POST /execute); parsing a PEM
  // costs about as much as the verification. Bounded like the verifier's own key cache.
  readonly #raw = new Map<string, Uint8Array | undefined>();

  /** False for any malformed key, payload or signature; never throws. */
  verify(publicKeyPem: string, payload: unknown, signatureBase64: string): boolean {
    try {
      const key = this.#rawKey(publicKeyPem);
      const signature = decodeBase64Strict(signatureBase64);
      if (key === undefined || !signature || signature.length !== 64) return false;
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return false;
      return nodeVerifyCrypto.ed25519(key)(Buffer.from(canonicalize(payload), 'utf8'), signature);
    } catch {
      return false;
    }
  }

  /** The raw public key (base64url), the same for every PEM text of one key. */
  publicKeyOf(publicKeyPem: string): string | undefined {
    const raw = this.#rawKey(publicKeyPem);
    return raw === undefined ? undefined : Buffer.from(raw).toString('base64url');
  }

  #rawKey(pem: string): Uint8Array | undefined {
    if (!this.#raw.has(pem)) {
      if (this.#raw.size >= 64) this.#raw.clear();
      const x = parseEd25519PublicKeyPem(pem);
      this.#raw.set(pem, x === undefined ? undefined : Buffer.from(x, 'base64url'));
    }
    return this.#raw.get(pem);
  }
}

/** Base64 Ed25519 signature over the canonical JSON of `payload` (CLI `ets step-up sign`). */
export function signStepUpPayload(privateKeyPem: string, payload: unknown): string {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: privateKeyPem, format: 'pem' });
  } catch {
    throw new TypeError('the step-up key is not a readable PEM private key');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new TypeError('the step-up key must be an Ed25519 private key');
  return nodeSign(null, Buffer.from(canonicalize(payload), 'utf8'), key).toString('base64');
}

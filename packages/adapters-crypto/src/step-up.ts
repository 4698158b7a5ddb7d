/**
 * Step-up envelopes (spec 2.6): a checker signs the canonical JSON of the payload with their own
 * Ed25519 key; the server holds only the registered public key PEM.
 */
import type { StepUpSignatureVerifier } from '@ets/domain';
import { createPrivateKey, createPublicKey, sign as nodeSign, verify as nodeVerify, type KeyObject } from 'node:crypto';
import { decodeBase64Strict } from './base64.js';
import { canonicalize } from './canonical-json.js';

const PUBLIC_KEY_PEM = /^\s*-----BEGIN PUBLIC KEY-----\r?\n[A-Za-z0-9+/=\r\n]+-----END PUBLIC KEY-----\s*$/;

/**
 * True for an Ed25519 public key in SPKI PEM form. Checked on the text first because
 * createPublicKey also accepts a private key PEM (and derives its public half), and a private
 * key pasted by mistake must be rejected, not stored.
 */
export function isEd25519PublicKeyPem(pem: unknown): boolean {
  return parseEd25519PublicKeyPem(pem) !== undefined;
}

export function parseEd25519PublicKeyPem(pem: unknown): KeyObject | undefined {
  if (typeof pem !== 'string' || !PUBLIC_KEY_PEM.test(pem)) return undefined;
  try {
    const key = createPublicKey({ key: pem.trim(), format: 'pem' });
    return key.type === 'public' && key.asymmetricKeyType === 'ed25519' ? key : undefined;
  } catch {
    return undefined;
  }
}

export class Ed25519StepUpVerifier implements StepUpSignatureVerifier {
  // Checkers are few and approve repeatedly; parsing a PEM costs more than the verification.
  readonly #keys = new Map<string, KeyObject | undefined>();

  /** False for any malformed key, payload or signature; never throws. */
  verify(publicKeyPem: string, payload: unknown, signatureBase64: string): boolean {
    try {
      const key = this.#key(publicKeyPem);
      const signature = decodeBase64Strict(signatureBase64);
      if (!key || !signature || signature.length !== 64) return false;
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return false;
      return nodeVerify(null, Buffer.from(canonicalize(payload), 'utf8'), key, signature);
    } catch {
      return false;
    }
  }

  #key(pem: string): KeyObject | undefined {
    if (this.#keys.has(pem)) return this.#keys.get(pem);
    const key = parseEd25519PublicKeyPem(pem);
    if (this.#keys.size >= 1024) this.#keys.clear();
    this.#keys.set(pem, key);
    return key;
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

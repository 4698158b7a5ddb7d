/**
 * The primitives that checking a signed record needs, behind one small interface, so that one
 * verification logic (offline-verifier.ts, offline/verify-offline.ts) runs on Node's crypto in the
 * service and `ets verify`, and on pure-JS @noble code in a browser or the client library.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { nobleMlDsa65Verifier } from './ml-dsa65-noble.js';

/** Checks a signature over `data` with one public key; false for anything malformed, never throws. */
export type VerifyFn = (data: Uint8Array, signature: Uint8Array) => boolean;

export interface VerifyCrypto {
  /** A verifier for a raw 32-byte Ed25519 public key; throws when the bytes cannot be one. */
  ed25519(publicKey: Uint8Array): VerifyFn;
  /** A verifier for a raw 1952-byte ML-DSA-65 public key; throws when the bytes cannot be one. */
  mlDsa65(publicKey: Uint8Array): VerifyFn;
  sha256(data: Uint8Array): Uint8Array;
}

const ED25519_PUBLIC_KEY_BYTES = 32;

/**
 * Throws unless `publicKey` is the canonical encoding of an Ed25519 point outside the small
 * subgroup. No real key is either, and OpenSSL accepts, for any message, a "signature" by a
 * small-order key that anyone can make; @noble refuses it. Checked for both implementations, so
 * that a record verifies the same in Node and in a browser, whatever JWKS it is checked against.
 */
export function assertStrongEd25519Key(publicKey: Uint8Array): void {
  if (publicKey.length !== ED25519_PUBLIC_KEY_BYTES) throw new TypeError('an Ed25519 public key is 32 bytes');
  if (ed25519.Point.fromBytes(publicKey, false).isSmallOrder()) throw new TypeError('a small-order Ed25519 key');
}

/**
 * Keeps the verifier made for each public key: making one checks the key (decompressing an Ed25519
 * point in JS costs far more than a verification) and imports it, and a verifier of records meets
 * the same few keys of a JWKS again and again. Bounded: a JWKS holds a handful of keys.
 */
export function perKey(make: (publicKey: Uint8Array) => VerifyFn, limit = 64): (publicKey: Uint8Array) => VerifyFn {
  const made = new Map<string, VerifyFn>();
  return (publicKey) => {
    // No Buffer: this module runs in browsers too.
    const id = String.fromCharCode(...publicKey);
    let fn = made.get(id);
    if (!fn) {
      fn = make(publicKey);
      if (made.size >= limit) made.clear();
      made.set(id, fn);
    }
    return fn;
  };
}

/**
 * @noble/curves, @noble/hashes and @noble/post-quantum: no platform API at all. Ed25519 verifies
 * by RFC 8032 rules (`zip215: false`), as OpenSSL does, so a signature that Node refuses is refused
 * here too rather than accepted under ZIP-215's laxer encodings.
 */
export const portableVerifyCrypto: VerifyCrypto = {
  ed25519: perKey((publicKey) => {
    assertStrongEd25519Key(publicKey);
    const key = Uint8Array.from(publicKey);
    return (data, signature) => {
      try {
        return ed25519.verify(signature, data, key, { zip215: false });
      } catch {
        return false;
      }
    };
  }),
  mlDsa65: perKey(nobleMlDsa65Verifier),
  sha256: (data) => sha256(data),
};

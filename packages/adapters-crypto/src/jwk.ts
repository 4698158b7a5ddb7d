import { calculateJwkThumbprint } from 'jose';

/** Public key shapes published in the JWKS (CONTRACT "Signed records"). */

export interface Ed25519PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

/** ML-DSA-65 per draft-ietf-cose-dilithium: "Algorithm Key Pair" with the raw key in `pub`. */
export interface MlDsa65PublicJwk {
  kty: 'AKP';
  alg: 'ML-DSA-65';
  pub: string;
  kid: string;
  use: 'sig';
}

export type PublicJwk = Ed25519PublicJwk | MlDsa65PublicJwk;

export interface PublicJwkSet {
  keys: PublicJwk[];
}

/**
 * What the verifier accepts: any object with a `keys` array, since a JWKS read from a file or
 * URL is untrusted input and each entry is checked before use.
 */
export interface JwksLike {
  readonly keys: readonly unknown[];
}

/**
 * keyId = algorithm prefix + RFC 7638 thumbprint of the public key: derived from the key alone,
 * so it is the same after every restart and on every instance that holds the same key.
 */
export async function ed25519KeyId(x: string): Promise<string> {
  return `ed25519-${await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x })}`;
}

export async function mlDsa65KeyId(pub: string): Promise<string> {
  return `mldsa65-${await calculateJwkThumbprint({ kty: 'AKP', alg: 'ML-DSA-65', pub })}`;
}

export function ed25519Jwk(x: string, kid: string): Ed25519PublicJwk {
  return { kty: 'OKP', crv: 'Ed25519', x, kid, alg: 'EdDSA', use: 'sig' };
}

export function mlDsa65Jwk(pub: string, kid: string): MlDsa65PublicJwk {
  return { kty: 'AKP', alg: 'ML-DSA-65', pub, kid, use: 'sig' };
}

/** The JWK of a published key, by algorithm. */
export function publicJwk(key: { keyId: string; alg: 'Ed25519' | 'ML-DSA-65'; publicKey: string }): PublicJwk {
  return key.alg === 'Ed25519' ? ed25519Jwk(key.publicKey, key.keyId) : mlDsa65Jwk(key.publicKey, key.keyId);
}

/** keyId the key's algorithm and public key derive (see ed25519KeyId). */
export function keyIdOf(key: { alg: 'Ed25519' | 'ML-DSA-65'; publicKey: string }): Promise<string> {
  return key.alg === 'Ed25519' ? ed25519KeyId(key.publicKey) : mlDsa65KeyId(key.publicKey);
}

/** A frozen JWKS of the given keys, in order (the object is replaced, never changed). */
export function frozenJwks(keys: ReadonlyArray<{ keyId: string; alg: 'Ed25519' | 'ML-DSA-65'; publicKey: string }>): PublicJwkSet {
  return Object.freeze({ keys: Object.freeze(keys.map((k) => Object.freeze(publicJwk(k)))) }) as unknown as PublicJwkSet;
}

/**
 * ML-DSA-65 (FIPS 204) behind one small interface, so the rest of the package does not care
 * whether Node's own implementation (Node 24+, OpenSSL 3.5) or @noble/post-quantum does the work.
 *
 * Private keys are kept as their 32-byte seed, stored in the standard PKCS#8 "seed" form of
 * RFC 9881, which OpenSSL 3.5 and Node 24 read directly. Public keys are the raw 1952-byte
 * encoding, which is what the JWK `pub` member carries.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  sign as nodeSign,
  verify as nodeVerify,
} from 'node:crypto';
import { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js';
import { ML_DSA_65_PUBLIC_KEY_BYTES, ML_DSA_65_SEED_BYTES, ML_DSA_65_SIGNATURE_BYTES, nobleMlDsa65Verifier, type MlDsa65Verify } from './ml-dsa65-noble.js';

export { ML_DSA_65_PUBLIC_KEY_BYTES, ML_DSA_65_SEED_BYTES, ML_DSA_65_SIGNATURE_BYTES, type MlDsa65Verify } from './ml-dsa65-noble.js';

// DER headers from RFC 9881 (OID 2.16.840.1.101.3.4.3.18); with fixed-size keys the encodings
// are these constant prefixes followed by the key bytes.
const ALGORITHM = '300b0609608648016503040312';
const PKCS8_SEED_PREFIX = Buffer.from(`3034020100${ALGORITHM}04228020`, 'hex');
const SPKI_PREFIX = Buffer.from(`308207b2${ALGORITHM}038207a100`, 'hex');

export interface MlDsa65PrivateKey {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export interface MlDsa65Backend {
  readonly name: 'node' | 'noble';
  privateKeyFromSeed(seed: Uint8Array): MlDsa65PrivateKey;
  /** Throws when `publicKey` is not a well-formed ML-DSA-65 public key. */
  verifierFor(publicKey: Uint8Array): MlDsa65Verify;
}

export function seedToPkcs8Pem(seed: Uint8Array): string {
  if (seed.length !== ML_DSA_65_SEED_BYTES) throw new RangeError('ML-DSA-65 seed must be 32 bytes');
  const body = Buffer.concat([PKCS8_SEED_PREFIX, seed]).toString('base64');
  return `-----BEGIN PRIVATE KEY-----\n${body.replace(/.{1,64}/g, '$&\n')}-----END PRIVATE KEY-----\n`;
}

/** The seed of a seed-form PKCS#8 ML-DSA-65 key (the form this package writes). */
export function pkcs8PemToSeed(pem: string): Uint8Array {
  const match = /^-----BEGIN PRIVATE KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PRIVATE KEY-----\s*$/.exec(pem);
  const der = match ? Buffer.from(match[1]!.replace(/\s/g, ''), 'base64') : undefined;
  if (
    !der ||
    der.length !== PKCS8_SEED_PREFIX.length + ML_DSA_65_SEED_BYTES ||
    !der.subarray(0, PKCS8_SEED_PREFIX.length).equals(PKCS8_SEED_PREFIX)
  ) {
    throw new TypeError('not a seed-form PKCS#8 ML-DSA-65 private key');
  }
  return new Uint8Array(der.subarray(PKCS8_SEED_PREFIX.length));
}

const nobleBackend: MlDsa65Backend = {
  name: 'noble',
  privateKeyFromSeed(seed) {
    const { secretKey, publicKey } = ml_dsa65.keygen(seed);
    return { publicKey, sign: (message) => ml_dsa65.sign(message, secretKey) };
  },
  verifierFor: nobleMlDsa65Verifier,
};

const nodeBackend: MlDsa65Backend = {
  name: 'node',
  privateKeyFromSeed(seed) {
    if (seed.length !== ML_DSA_65_SEED_BYTES) throw new RangeError('ML-DSA-65 seed must be 32 bytes');
    const privateKey = createPrivateKey({
      key: Buffer.concat([PKCS8_SEED_PREFIX, seed]),
      format: 'der',
      type: 'pkcs8',
    });
    const spki = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
    if (spki.length !== SPKI_PREFIX.length + ML_DSA_65_PUBLIC_KEY_BYTES) {
      throw new TypeError('unexpected ML-DSA-65 public key encoding');
    }
    return {
      publicKey: new Uint8Array(spki.subarray(SPKI_PREFIX.length)),
      sign: (message) => nodeSign(null, message, privateKey),
    };
  },
  verifierFor(publicKey) {
    if (publicKey.length !== ML_DSA_65_PUBLIC_KEY_BYTES) throw new TypeError('bad ML-DSA-65 public key');
    const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' });
    return (message, signature) => {
      if (signature.length !== ML_DSA_65_SIGNATURE_BYTES) return false;
      try {
        return nodeVerify(null, message, key, signature);
      } catch {
        return false;
      }
    };
  },
};

// RFC 9881 example key: seed 00..1f; SHA-256 of its public key.
const KAT_SEED = Uint8Array.from({ length: 32 }, (_, i) => i);
const KAT_PUBLIC_KEY_SHA256 = 'd666806e11cee19a7c989f7445f90dd419cf4d2d51db8c0fdb4c0f0a542238c9';

/**
 * Native ML-DSA is several times faster, but only used when it reproduces the RFC 9881 key and
 * interoperates with noble on this very runtime; anything else (Node 20/22, an OpenSSL without
 * ML-DSA, a different key encoding) falls back to noble instead of failing.
 */
function nativeBackendIfSound(): MlDsa65Backend | undefined {
  try {
    const key = nodeBackend.privateKeyFromSeed(KAT_SEED);
    const digest = createHash('sha256').update(key.publicKey).digest('hex');
    if (digest !== KAT_PUBLIC_KEY_SHA256) return undefined;
    const message = Buffer.from('ml-dsa-65 self-test', 'utf8');
    const signature = key.sign(message);
    if (!nobleBackend.verifierFor(key.publicKey)(message, signature)) return undefined;
    if (!nodeBackend.verifierFor(key.publicKey)(message, signature)) return undefined;
    return nodeBackend;
  } catch {
    return undefined;
  }
}

let selected: MlDsa65Backend | undefined;

/** The ML-DSA-65 implementation in use (chosen once per process). */
export function mlDsa65(): MlDsa65Backend {
  selected ??= nativeBackendIfSound() ?? nobleBackend;
  return selected;
}

/** For tests: the pure-JS implementation regardless of the runtime. */
export const nobleMlDsa65: MlDsa65Backend = nobleBackend;

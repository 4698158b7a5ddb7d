import { ed25519 } from '@noble/curves/ed25519.js';
import { canonicalize, fromBase64, fromHex, toBase64, utf8 } from '@ets/adapters-crypto/portable';

/**
 * Something that signs with an Ed25519 private key it holds itself (a non-extractable WebCrypto
 * key, a hardware token): the raw 64-byte signature of `message`.
 */
export interface Ed25519Signer {
  sign(message: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

/**
 * An approver's Ed25519 step-up private key: PKCS#8 PEM (what `openssl genpkey -algorithm
 * ed25519` and `ets demo --setup` write), its 32-byte seed, or an `Ed25519Signer`.
 */
export type Ed25519PrivateKey = string | Uint8Array | Ed25519Signer;

export interface Ed25519KeyPair {
  /** PKCS#8 PEM: keep it with its owner. */
  privateKeyPem: string;
  /** SPKI PEM: what `ets keys add --step-up-key -` registers for the owner's USER key. */
  publicKeyPem: string;
}

// DER of an Ed25519 key whose only variable part is the 32 key bytes (RFC 8410).
const PKCS8_PREFIX = fromHex('302e020100300506032b657004220420')!;
const SPKI_PREFIX = fromHex('302a300506032b6570032100')!;

/** A fresh Ed25519 key pair for a step-up key, as PEM. */
export function generateEd25519KeyPair(): Ed25519KeyPair {
  const seed = globalThis.crypto.getRandomValues(new Uint8Array(32));
  return { privateKeyPem: pem('PRIVATE KEY', PKCS8_PREFIX, seed), publicKeyPem: pem('PUBLIC KEY', SPKI_PREFIX, ed25519.getPublicKey(seed)) };
}

/** The public key PEM (SPKI) of an Ed25519 private key given as PEM or seed. */
export function ed25519PublicKeyPem(privateKey: string | Uint8Array): string {
  return pem('PUBLIC KEY', SPKI_PREFIX, ed25519.getPublicKey(seedOf(privateKey)));
}

/** A signer over a WebCrypto Ed25519 private key, which may be non-extractable. */
export function webCryptoSigner(key: CryptoKey): Ed25519Signer {
  return { sign: async (message) => new Uint8Array(await globalThis.crypto.subtle.sign('Ed25519', key, message as Uint8Array<ArrayBuffer>)) };
}

/** Base64 Ed25519 signature over the RFC 8785 canonical JSON of `payload`: how envelopes and approvals are signed. */
export async function signCanonical(key: Ed25519PrivateKey, payload: object): Promise<string> {
  const message = utf8(canonicalize(payload));
  const signature = typeof key === 'string' || key instanceof Uint8Array ? ed25519.sign(message, seedOf(key)) : await key.sign(message);
  if (!(signature instanceof Uint8Array) || signature.length !== 64) throw new TypeError('the signer did not return a 64-byte Ed25519 signature');
  return toBase64(signature);
}

function seedOf(key: string | Uint8Array): Uint8Array {
  if (key instanceof Uint8Array) {
    if (key.length !== 32) throw new TypeError('an Ed25519 private key seed is 32 bytes');
    return key;
  }
  return pkcs8DerOf(key).slice(PKCS8_PREFIX.length);
}

/** The DER of an Ed25519 private key in PKCS#8 PEM (what `openssl genpkey -algorithm ed25519` and `ets` write). */
function pkcs8DerOf(pem: string): Uint8Array {
  const match = /^\s*-----BEGIN PRIVATE KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PRIVATE KEY-----\s*$/.exec(pem);
  const der = match ? fromBase64(match[1]!.replace(/\s/g, '')) : undefined;
  if (!der || der.length !== PKCS8_PREFIX.length + 32 || PKCS8_PREFIX.some((b, i) => der[i] !== b)) {
    throw new TypeError('the key is not an Ed25519 private key in PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----")');
  }
  return der;
}

/**
 * A non-extractable WebCrypto Ed25519 key from a PKCS#8 PEM (browsers with WebCrypto Ed25519, Node
 * 20+): sign with `webCryptoSigner(key)`; the key's bytes cannot be read back out of it.
 */
export async function webCryptoKeyFromPem(pem: string): Promise<CryptoKey> {
  return globalThis.crypto.subtle.importKey('pkcs8', pkcs8DerOf(pem) as Uint8Array<ArrayBuffer>, { name: 'Ed25519' }, false, ['sign']);
}

function pem(label: string, prefix: Uint8Array, key: Uint8Array): string {
  const der = new Uint8Array(prefix.length + key.length);
  der.set(prefix);
  der.set(key, prefix.length);
  return `-----BEGIN ${label}-----\n${toBase64(der).replace(/.{1,64}/g, '$&\n')}-----END ${label}-----\n`;
}

/**
 * Private keys held by this process (the `disk` and `env` providers): generation, PEM parsing and
 * the signing closure. Private keys stay inside closures; only public parts are returned.
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign as nodeSign, type KeyObject } from 'node:crypto';
import { encodeBase64, encodeBase64Url } from './base64.js';
import { ed25519KeyId, mlDsa65KeyId } from './jwk.js';
import type { ActiveSigningKeys, ProducedSignatures } from './key-provider.js';
import { mlDsa65, pkcs8PemToSeed, seedToPkcs8Pem, type MlDsa65PrivateKey } from './ml-dsa65.js';

export interface GeneratedKey {
  keyId: string;
  /** Raw public key, base64url. */
  publicKey: string;
  /** PKCS#8 PEM (ML-DSA-65 in seed form). */
  pem: string;
}

export async function generateEd25519(): Promise<GeneratedKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const x = ed25519X(publicKey);
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return { keyId: await ed25519KeyId(x), publicKey: x, pem };
}

export async function generateMlDsa65(): Promise<GeneratedKey> {
  const seed = randomBytes(32);
  const pub = encodeBase64Url(mlDsa65().privateKeyFromSeed(seed).publicKey);
  return { keyId: await mlDsa65KeyId(pub), publicKey: pub, pem: seedToPkcs8Pem(seed) };
}

/** The Ed25519 private key of a PKCS#8 PEM, or undefined when the text is not one. */
export function parseEd25519Pem(pem: string): { key: KeyObject; publicKey: string } | undefined {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    return undefined;
  }
  if (key.asymmetricKeyType !== 'ed25519') return undefined;
  return { key, publicKey: ed25519X(key) };
}

/** The ML-DSA-65 private key of a seed-form PKCS#8 PEM, or undefined when the text is not one. */
export function parseMlDsa65Pem(pem: string): { key: MlDsa65PrivateKey; publicKey: string } | undefined {
  try {
    const key = mlDsa65().privateKeyFromSeed(pkcs8PemToSeed(pem));
    return { key, publicKey: encodeBase64Url(key.publicKey) };
  } catch {
    return undefined;
  }
}

export function localSigningKeys(
  keyId: string,
  edKey: KeyObject,
  pq: { keyId: string; key: MlDsa65PrivateKey } | undefined,
): ActiveSigningKeys {
  const signEd25519 = async (data: Uint8Array): Promise<string> => nodeSign(null, data, edKey).toString('base64');
  if (!pq) {
    return Object.freeze({
      keyId,
      sign: async (data: Uint8Array): Promise<ProducedSignatures> => ({ signature: await signEd25519(data) }),
      signEd25519,
    });
  }
  const pqKey = pq.key;
  return Object.freeze({
    keyId,
    pqKeyId: pq.keyId,
    sign: async (data: Uint8Array): Promise<ProducedSignatures> => ({
      signature: await signEd25519(data),
      pqSignature: encodeBase64(pqKey.sign(data)),
    }),
    signEd25519,
  });
}

function ed25519X(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new Error('Ed25519 key without a public part');
  return jwk.x;
}

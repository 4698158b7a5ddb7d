import { createHash, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { mlDsa65 } from './ml-dsa65.js';
import { assertStrongEd25519Key, perKey, type VerifyCrypto } from './verify-crypto.js';

/**
 * Node's crypto for verification: what the service and `ets verify` use (OpenSSL's Ed25519 and
 * SHA-256, and native ML-DSA-65 where the runtime has a sound one).
 */
export const nodeVerifyCrypto: VerifyCrypto = {
  ed25519: perKey((publicKey) => {
    assertStrongEd25519Key(publicKey);
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') }, format: 'jwk' });
    return (data, signature) => {
      try {
        return nodeVerify(null, data, key, signature);
      } catch {
        return false;
      }
    };
  }),
  mlDsa65: perKey((publicKey) => mlDsa65().verifierFor(publicKey)),
  sha256: (data) => createHash('sha256').update(data).digest(),
};

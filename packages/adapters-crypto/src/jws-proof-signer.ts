import type { ProofSigner } from '@ets/domain';
import { canonicalize } from './canonical-json.js';
import type { SigningKeySource } from './record-signer.js';

const b64url = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');

/**
 * Compact JWS (RFC 7515) with the service's active Ed25519 key: header `{alg: "EdDSA", kid, typ}`,
 * the claims as RFC 8785 canonical JSON. Anyone verifies it with the JWKS and any JOSE library
 * (e.g. jose's `compactVerify` with `createLocalJWKSet`). Ed25519 only, also in hybrid mode: JWS
 * has no registered ML-DSA-65 algorithm in the libraries clients use.
 */
export class JwsProofSigner implements ProofSigner {
  constructor(private readonly keys: SigningKeySource) {}

  async signProof(claims: Record<string, unknown>, type: string): Promise<string> {
    // One snapshot: the kid in the header is always the key that signed.
    const active = this.keys.signingKeys();
    const input = `${b64url(JSON.stringify({ alg: 'EdDSA', kid: active.keyId, typ: type }))}.${b64url(canonicalize(claims))}`;
    const { signature } = await active.sign(Buffer.from(input, 'ascii'));
    return `${input}.${Buffer.from(signature, 'base64').toString('base64url')}`;
  }
}

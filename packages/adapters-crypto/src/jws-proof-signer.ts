import type { ProofSigner } from '@ets/domain';
import { canonicalize } from './canonical-json.js';
import { signCompactJws } from './compact-jws.js';
import type { SigningKeySource } from './record-signer.js';

/**
 * Compact JWS (RFC 7515) with the service's active Ed25519 key (see signCompactJws), the claims as
 * RFC 8785 canonical JSON. Anyone verifies it with the JWKS and any JOSE library (e.g. jose's
 * `compactVerify` with `createLocalJWKSet`).
 */
export class JwsProofSigner implements ProofSigner {
  constructor(private readonly keys: SigningKeySource) {}

  async signProof(claims: Record<string, unknown>, type: string): Promise<string> {
    return signCompactJws(this.keys, type, canonicalize(claims));
  }
}

import type { ReleaseClaims, ReleaseTokenSigner } from '@ets/domain';
import { signCompactJws } from './compact-jws.js';
import type { SigningKeySource } from './record-signer.js';

export const RELEASE_TOKEN_TYPE = 'ets-release+jwt';

/**
 * Signs releases to external endpoints (CONTRACT "Egress") as a compact JWS with the active
 * Ed25519 key of whatever provider holds it (see signCompactJws), so an endpoint verifies with the
 * JWKS alone (jose does, in the receiver library). In hybrid mode too the release carries the
 * Ed25519 signature only: JWS has no hybrid form.
 */
export class KeyRingReleaseSigner implements ReleaseTokenSigner {
  constructor(private readonly keys: SigningKeySource) {}

  async sign(claims: ReleaseClaims): Promise<string> {
    return signCompactJws(this.keys, RELEASE_TOKEN_TYPE, JSON.stringify(claims));
  }
}

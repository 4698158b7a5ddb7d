import { base64url } from 'jose';
import type { ReleaseClaims, ReleaseTokenSigner } from '@ets/domain';
import type { SigningKeySource } from './record-signer.js';

export const RELEASE_TOKEN_TYPE = 'ets-release+jwt';

const encodeJson = (value: unknown): string => base64url.encode(JSON.stringify(value));

/**
 * Signs releases to external endpoints (CONTRACT "Egress") as a compact JWS (RFC 7515) with the
 * active Ed25519 key of whatever provider holds it, `kid` its id in the JWKS, so an endpoint
 * verifies with the JWKS alone (jose does, in the receiver library). The signature is the
 * provider's own Ed25519 over the JWS signing input: a PKCS#11 key never leaves its module, so no
 * JWS library can be handed it; only the encoding of header and payload is done here. In hybrid
 * mode too the release carries the Ed25519 signature only: JWS has no hybrid form.
 */
export class KeyRingReleaseSigner implements ReleaseTokenSigner {
  constructor(private readonly keys: SigningKeySource) {}

  async sign(claims: ReleaseClaims): Promise<string> {
    const active = this.keys.signingKeys(); // one snapshot: kid and signature from the same key
    const input = `${encodeJson({ alg: 'EdDSA', kid: active.keyId, typ: RELEASE_TOKEN_TYPE })}.${encodeJson(claims)}`;
    const { signature } = await active.sign(Buffer.from(input, 'ascii'));
    return `${input}.${base64url.encode(Buffer.from(signature, 'base64'))}`;
  }
}

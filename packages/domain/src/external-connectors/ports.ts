import type { RegistrationStore } from '../governance/registrations.js';
import type { ReleaseCondition } from '../execution/connectors.js';
import type { ExternalConnectorRegistration } from './registration.js';

/**
 * Active external registrations: at most one per capability (the key of `active`; the store
 * enforces it atomically, whoever races). Registrations are never deleted; revoking one ends it.
 */
export interface ExternalConnectorStore extends RegistrationStore<ExternalConnectorRegistration> {}

/** The claims of a signed release (CONTRACT "Egress"); NumericDates in seconds. */
export interface ReleaseClaims {
  iss: string;
  aud: string;
  /** NumericDates (RFC 7519): seconds since the epoch, to the millisecond (so possibly with a fraction). */
  iat: number;
  exp: number;
  jti: string;
  businessTransactionId: string;
  action: string;
  parameters: Record<string, unknown>;
  intentHash: string;
  conditions: ReleaseCondition[];
}

/** Signs a release as a compact JWS: `{alg: EdDSA, kid: <a JWKS key>, typ: ets-release+jwt}`. */
export interface ReleaseTokenSigner {
  sign(claims: ReleaseClaims): Promise<string>;
}

import { createLocalJWKSet, createRemoteJWKSet, errors, jwtVerify, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { MemoryJtiStore, type JtiStore } from './jti-store.js';

/** The release token's `typ` (CONTRACT "Egress"). */
export const RELEASE_TYPE = 'ets-release+jwt';

export interface ReleaseCondition {
  signal: string;
  value: unknown;
  validUntil: string;
  source: string;
}

/** A release whose signature, audience, issuer, expiry and single use were checked. */
export interface VerifiedRelease {
  jti: string;
  iss: string;
  aud: string;
  /** NumericDates (RFC 7519): seconds since the epoch, with a fraction to the millisecond. */
  iat: number;
  /** Acted on only before this instant: iat + the endpoint's timeout, or the earliest condition's end if sooner. */
  exp: number;
  /** The signing key's id in the service's JWKS. */
  kid: string;
  businessTransactionId: string;
  /** The capability, `namespace:verb`. */
  action: string;
  /** Only the parameters the registration forwards. */
  parameters: Record<string, unknown>;
  /** The `businessTransactionHash` of the service's signed Execution Intent. */
  intentHash: string;
  conditions: ReleaseCondition[];
}

export type RefusalReason = 'malformed' | 'signature' | 'audience' | 'issuer' | 'expired' | 'replayed';
export type ReleaseVerdict = { ok: true; release: VerifiedRelease } | { ok: false; reason: RefusalReason; message: string };

export interface ReleaseVerifierOptions {
  /** The service's public keys: a JWKS, or the URL of its `/.well-known/jwks.json`. */
  jwks: JSONWebKeySet | string | URL;
  /** This endpoint exactly as registered with the service (the normalised URL): the `aud` it must carry. */
  audience: string;
  /** The service's `iss` (its SVC_ISSUER); default `ets`. */
  issuer?: string;
  jtiStore?: JtiStore;
  now?: () => Date;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCondition = (c: unknown): c is ReleaseCondition =>
  isObject(c) && typeof c.signal === 'string' && typeof c.validUntil === 'string' && !Number.isNaN(Date.parse(c.validUntil)) && typeof c.source === 'string' && 'value' in c;

/**
 * Verifies a release (CONTRACT "Egress") with the service's JWKS: EdDSA signature by a key of the
 * JWKS, `typ`, `aud` = this endpoint, `iss`, not expired (no clock tolerance: the service already
 * keeps `exp` short), and `jti` never seen before. Conditions are checked by `unmetConditions`.
 *
 * `exp` is a NumericDate with a fraction (the service signs to the millisecond, so a release is
 * valid for its whole timeout). It is compared to the millisecond here: jose compares whole
 * seconds of the clock, which would accept a release for up to a second after its `exp`, after
 * the jti store has forgotten it.
 */
export class ReleaseVerifier {
  private readonly keys: JWTVerifyGetKey;
  private readonly jtis: JtiStore;
  private readonly now: () => Date;

  constructor(private readonly options: ReleaseVerifierOptions) {
    const { jwks } = options;
    this.keys = typeof jwks === 'string' || jwks instanceof URL ? createRemoteJWKSet(new URL(jwks)) : createLocalJWKSet(jwks);
    this.now = options.now ?? (() => new Date());
    this.jtis = options.jtiStore ?? new MemoryJtiStore(this.now);
  }

  async verify(token: unknown): Promise<ReleaseVerdict> {
    if (typeof token !== 'string' || token === '') return { ok: false, reason: 'malformed', message: 'release must be a compact JWS' };
    let payload: Record<string, unknown>;
    let kid: string;
    const now = this.now();
    try {
      const verified = await jwtVerify(token, this.keys, {
        algorithms: ['EdDSA'],
        typ: RELEASE_TYPE,
        audience: this.options.audience,
        issuer: this.options.issuer ?? 'ets',
        requiredClaims: ['iat', 'exp', 'jti'],
        currentDate: now,
      });
      payload = verified.payload as Record<string, unknown>;
      kid = verified.protectedHeader.kid ?? '';
    } catch (e) {
      return refusal(e);
    }
    const p = payload;
    if (!(Math.round(Number(p.exp) * 1000) > now.getTime())) return EXPIRED;
    if (
      typeof p.businessTransactionId !== 'string' ||
      typeof p.action !== 'string' ||
      !isObject(p.parameters) ||
      typeof p.intentHash !== 'string' ||
      !Array.isArray(p.conditions) ||
      !p.conditions.every(isCondition)
    ) {
      return { ok: false, reason: 'malformed', message: 'the release lacks businessTransactionId, action, parameters, intentHash or conditions' };
    }
    if (!(await this.jtis.consume(String(p.jti), Number(p.exp)))) return { ok: false, reason: 'replayed', message: `release ${String(p.jti)} was already received` };
    return { ok: true, release: { ...(p as unknown as VerifiedRelease), kid } };
  }
}

const EXPIRED: ReleaseVerdict = { ok: false, reason: 'expired', message: 'the release has expired' };

function refusal(e: unknown): ReleaseVerdict {
  if (e instanceof errors.JWTExpired) return EXPIRED;
  if (e instanceof errors.JWTClaimValidationFailed && e.claim === 'aud') return { ok: false, reason: 'audience', message: 'the release is for another endpoint' };
  if (e instanceof errors.JWTClaimValidationFailed && e.claim === 'iss') return { ok: false, reason: 'issuer', message: 'the release is from another issuer' };
  if (e instanceof errors.JWSSignatureVerificationFailed || e instanceof errors.JWKSNoMatchingKey) return { ok: false, reason: 'signature', message: 'the signature does not verify with the service keys' };
  return { ok: false, reason: 'malformed', message: `not a valid release (${(e as { code?: string }).code ?? 'invalid'})` };
}

/**
 * The conditions that no longer hold: each one's `validUntil` has passed, or `check` (the endpoint
 * owner's own view of the fact) says no. Empty: act.
 */
export async function unmetConditions(
  release: VerifiedRelease,
  options: { now?: () => Date; check?: (condition: ReleaseCondition) => boolean | Promise<boolean> } = {},
): Promise<ReleaseCondition[]> {
  const now = (options.now ?? (() => new Date()))().getTime();
  const unmet: ReleaseCondition[] = [];
  for (const c of release.conditions) {
    if (!(Date.parse(c.validUntil) > now) || (options.check && !(await options.check(c)))) unmet.push(c);
  }
  return unmet;
}

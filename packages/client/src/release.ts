/**
 * For the owner of an endpoint registered as an external connector: verify the release JWS the
 * service posts (`{"release": "<JWS>"}`) with its JWKS (signature, `aud` = this endpoint, `iss`,
 * expiry, single use by `jti`) and answer in the protocol. The same code as packages/release-receiver.
 */
export {
  ReleaseVerifier,
  MemoryJtiStore,
  RELEASE_TYPE,
  unmetConditions,
  handleRelease,
  executed,
  conditionsNotMet,
  type ReleaseVerifierOptions,
  type ReleaseVerdict,
  type VerifiedRelease,
  type ReleaseCondition,
  type RefusalReason,
  type JtiStore,
  type ProtocolAnswer,
  type HandleReleaseOptions,
} from '@ets/release-receiver/verify';

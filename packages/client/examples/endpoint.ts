/**
 * The owner of an endpoint registered as an external connector: the service posts
 * `{"release": "<JWS>"}`; act only on a release signed by the service, for this endpoint, not
 * expired and never seen before.
 */
import { handleRelease, ReleaseVerifier, type ProtocolAnswer, type ReleaseVerifierOptions } from '@ets/client';

export function releaseEndpoint(options: { jwks: ReleaseVerifierOptions['jwks']; endpoint: string; pay: (parameters: Record<string, unknown>) => Promise<unknown> }) {
  // One verifier for the endpoint's lifetime: it remembers every release it accepted (single use).
  const verifier = new ReleaseVerifier({ jwks: options.jwks, audience: options.endpoint });
  return {
    verifier,
    /** The answer to one POST: 200 executed / conditionsNotMet, 401 refused, 409 already received. */
    answer: (body: unknown): Promise<ProtocolAnswer> => handleRelease(body, verifier, (release) => options.pay(release.parameters)),
  };
}

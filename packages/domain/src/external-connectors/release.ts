/**
 * Release to an external endpoint (spec 4.3.7-8, CONTRACT "Egress"): `POST <endpoint>` with
 * `{"release": "<compact JWS>"}` through the egress port, and what the answer means. Nothing here
 * retries: the egress port sends a request at most once, so the endpoint never receives a release
 * twice.
 */
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Egress, EgressResult } from '../egress/ports.js';
import { ConnectorError, namespaceOf, type Connector, type ReleaseCondition, type ReleaseRequest } from '../execution/connectors.js';
import { isPlainObject } from '../shared/guards.js';
import type { ExternalConnectorStore, ReleaseClaims, ReleaseTokenSigner } from './ports.js';
import type { ExternalConnectorRegistration } from './registration.js';
import { stillActive } from '../governance/registrations.js';

export interface ExternalReleaseDeps {
  egress: Egress;
  signer: ReleaseTokenSigner;
  clock: Clock;
  ids: IdGenerator;
  /** The `iss` claim (SVC_ISSUER). */
  issuer: string;
  registrations: Pick<ExternalConnectorStore, 'active'>;
}

/**
 * A NumericDate (RFC 7519 2: seconds since the epoch, "non-integer values can be represented")
 * to the millisecond. Whole seconds would cut up to a second off a release: signed at x.998 s with a
 * timeout of 1000 ms, `iat` x and `exp` x + 1 would leave it 2 ms to arrive.
 */
const numericDate = (ms: number): number => ms / 1000;

/**
 * The claims of one release: only the forwarded parameters, the facts as conditions, and an
 * expiry no later than the earliest condition and no later than iat + the endpoint's timeout
 * (exactly that when no condition ends sooner), to the millisecond.
 * A condition that has already passed is `conditions-not-met`: nothing is signed or sent.
 */
export function releaseClaims(
  registration: ExternalConnectorRegistration,
  request: ReleaseRequest,
  at: { now: Date; jti: string; issuer: string },
): ReleaseClaims {
  const now = at.now.getTime();
  let expires = now + registration.timeoutMs;
  for (const c of request.conditions) {
    const until = Date.parse(c.validUntil);
    if (!(until > now)) throw new ConnectorError('conditions-not-met', `The fact '${c.signal}' held only until ${c.validUntil}.`);
    expires = Math.min(expires, until);
  }
  const parameters: Record<string, unknown> = {};
  for (const name of registration.forwardedParameters) {
    if (Object.hasOwn(request.parameters, name)) parameters[name] = request.parameters[name];
  }
  return {
    iss: at.issuer,
    aud: registration.endpoint,
    iat: numericDate(now),
    exp: numericDate(expires),
    jti: at.jti,
    businessTransactionId: request.businessTransactionId,
    action: request.action,
    parameters,
    intentHash: request.intentHash,
    conditions: request.conditions.map((c: ReleaseCondition) => ({ signal: c.signal, value: c.value, validUntil: c.validUntil, source: c.source })),
  };
}

/** What the endpoint's answer means; throws ConnectorError for everything but `executed`. */
export function interpretAnswer(answer: EgressResult, endpoint: string): { result: unknown } {
  if (answer.outcome === 'not-sent') throw new ConnectorError('before-send', `Nothing was sent to ${endpoint}: ${answer.message}.`);
  if (answer.outcome === 'unknown') throw new ConnectorError('outcome-unknown', `The release was sent to ${endpoint}; its outcome is unknown: ${answer.message}.`);
  const body = answer.body;
  if (answer.status >= 200 && answer.status < 300 && isPlainObject(body)) {
    if (body.status === 'executed') return { result: body.result ?? null };
    if (body.status === 'conditionsNotMet') {
      const reason = typeof body.reason === 'string' ? body.reason.slice(0, 500) : 'no reason given';
      throw new ConnectorError('conditions-not-met', `The endpoint did not act: ${reason}`);
    }
  }
  throw new ConnectorError('outcome-unknown', `The release was sent to ${endpoint}; it answered ${answer.status} without a status of the protocol, so its outcome is unknown.`);
}

/** The connector of one active registration. */
export class ExternalConnector implements Connector {
  readonly namespace: string;
  readonly policyName: string;

  constructor(
    private readonly registration: ExternalConnectorRegistration,
    private readonly deps: ExternalReleaseDeps,
  ) {
    this.namespace = namespaceOf(registration.capability);
    this.policyName = registration.policyName;
  }

  async release(request: ReleaseRequest): Promise<{ result: unknown }> {
    const { registration, deps } = this;
    // It may have been revoked since the request was decided: then nothing may be sent.
    await stillActive(deps.registrations, registration.capability, registration.registrationId, `'${registration.capability}'`);
    const claims = releaseClaims(registration, request, { now: deps.clock.now(), jti: deps.ids.uuid(), issuer: deps.issuer });
    let token: string;
    try {
      token = await deps.signer.sign(claims);
    } catch (e) {
      throw new ConnectorError('before-send', 'The release could not be signed; nothing was sent.', { cause: e });
    }
    const answer = await deps.egress.postJson({ endpoint: registration.endpoint, body: { release: token }, timeoutMs: registration.timeoutMs });
    return interpretAnswer(answer, registration.endpoint);
  }
}

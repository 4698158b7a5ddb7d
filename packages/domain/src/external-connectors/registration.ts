/**
 * External connector changes and registrations (spec 2.5, CONTRACT "External connector
 * changes"): what a proposal may say, each rule broken answered 400 naming the field.
 */
import type { PendingChange } from '../governance/change.js';
import { changeViewBase, changeViewDecision, readProposalFields, type RegistryChangeView } from '../governance/governed-registry.js';
import { readEndpoint } from '../egress/endpoint.js';
import { namespaceOf } from '../execution/connectors.js';
import { invalid } from '../shared/errors.js';
import { readName } from '../shared/names.js';

export const EXTERNAL_CONNECTOR_CHANGE_KIND = 'external-connector';
export const CONNECTOR_TIMEOUT_MS = { min: 1000, max: 30000, default: 10000 } as const;
export const FORWARDED_PARAMETER_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const FORWARDED_PARAMETERS_MAX = 100;

/** An active binding of a capability to an endpoint; `registrationId` is the approved register change's id. */
export interface ExternalConnectorRegistration {
  registrationId: string;
  capability: string;
  endpoint: string;
  policyName: string;
  forwardedParameters: string[];
  timeoutMs: number;
  proposer: string;
  approvedBy: string;
  registeredAt: string;
}

export type RegisterPayload = {
  kind: 'register';
  capability: string;
  endpoint: string;
  policyName: string;
  forwardedParameters: string[];
  timeoutMs: number;
};
/** A revoke names the registration that was active when it was proposed; that is what it ends. */
export type RevokePayload = { kind: 'revoke'; capability: string; registrationId: string };
export type ExternalConnectorChangePayload = RegisterPayload | RevokePayload;

/** The External Connector Change as the API shows it (bare object, CONTRACT property names). */
export interface ExternalConnectorChangeView extends RegistryChangeView {
  capability: string;
  endpoint?: string;
  policyName?: string;
  forwardedParameters?: string[];
  timeoutMs?: number;
}

export function toChangeView(c: PendingChange<ExternalConnectorChangePayload>): ExternalConnectorChangeView {
  const p = c.payload;
  return {
    ...changeViewBase(c),
    capability: p.capability,
    ...(p.kind === 'register'
      ? { endpoint: p.endpoint, policyName: p.policyName, forwardedParameters: p.forwardedParameters, timeoutMs: p.timeoutMs }
      : { registrationId: p.registrationId }),
    ...changeViewDecision(c),
  };
}

export const describeChange = (c: PendingChange<ExternalConnectorChangePayload>): string =>
  c.payload.kind === 'register'
    ? `register external connector '${c.payload.capability}' at ${c.payload.endpoint} (policy '${c.payload.policyName}', forwards [${c.payload.forwardedParameters.join(', ')}], timeout ${c.payload.timeoutMs} ms)`
    : `revoke external connector '${c.payload.capability}' (registration ${c.payload.registrationId})`;

const FIELDS = {
  register: ['kind', 'capability', 'reason', 'endpoint', 'policyName', 'forwardedParameters', 'timeoutMs'],
  revoke: ['kind', 'capability', 'reason'],
} as const;

export type ProposalInput = { kind: 'register'; payload: Omit<RegisterPayload, 'kind'> } | { kind: 'revoke'; capability: string };

/**
 * The rules a proposal must keep that need no lookup, in the order of the contract's field list.
 * `reason` is read by maker-checker. Where the endpoint resolves is checked by the caller.
 */
export function readProposal(input: unknown, ownedElsewhere: NamespaceOwner): ProposalInput {
  const { kind, body } = readProposalFields(input, FIELDS, '{"kind": "register" | "revoke", "capability": "namespace:verb", …}');
  const capability = readCapability(body.capability, ownedElsewhere);
  if (kind === 'revoke') return { kind, capability };

  const endpoint = readEndpoint(body.endpoint);
  if (!endpoint.ok) throw invalid(`endpoint ${endpoint.problem}`);
  const policyName = readName('policyName', body.policyName, 'policyName');
  return {
    kind,
    payload: {
      capability,
      endpoint: endpoint.endpoint.url,
      policyName,
      forwardedParameters: readForwardedParameters(body.forwardedParameters),
      timeoutMs: readConnectorTimeout(body.timeoutMs),
    },
  };
}

/** Who owns a namespace if another kind of connector does (then no external registration may use it). */
export type NamespaceOwner = (namespace: string) => string | undefined;

function readCapability(value: unknown, ownedElsewhere: NamespaceOwner): string {
  const capability = readName('capability', value, 'capability');
  const namespace = namespaceOf(capability);
  const owner = ownedElsewhere(namespace);
  if (owner !== undefined) throw invalid(`capability must not be in the namespace '${namespace}': it is reserved (${owner}).`);
  return capability;
}

/** The policy that decides a registration's requests (a policy name, at most 128 characters). */
export function readPolicyName(value: unknown): string {
  return readName('policyName', value, 'policyName');
}

function readForwardedParameters(value: unknown): string[] {
  if (!Array.isArray(value)) throw invalid('forwardedParameters is required: the names of the intent parameters sent to the endpoint (an array, empty to send none).');
  if (value.length > FORWARDED_PARAMETERS_MAX) throw invalid(`forwardedParameters must name at most ${FORWARDED_PARAMETERS_MAX} parameters.`);
  const seen = new Set<string>();
  value.forEach((name, i) => {
    if (typeof name !== 'string' || !FORWARDED_PARAMETER_PATTERN.test(name)) {
      throw invalid(`forwardedParameters[${i}] must be a parameter name of at most 64 characters matching ${FORWARDED_PARAMETER_PATTERN.source}.`);
    }
    if (seen.has(name)) throw invalid(`forwardedParameters[${i}] repeats '${name}'.`);
    seen.add(name);
  });
  return value as string[];
}

/** How long a release waits for its answer (spec 2.5, 8): 1000 to 30000 ms, default 10000. */
export function readConnectorTimeout(value: unknown): number {
  if (value === undefined) return CONNECTOR_TIMEOUT_MS.default;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < CONNECTOR_TIMEOUT_MS.min || value > CONNECTOR_TIMEOUT_MS.max) {
    throw invalid(`timeoutMs must be a whole number of milliseconds from ${CONNECTOR_TIMEOUT_MS.min} to ${CONNECTOR_TIMEOUT_MS.max} (default ${CONNECTOR_TIMEOUT_MS.default}).`);
  }
  return value;
}

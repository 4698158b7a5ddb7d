/**
 * External connector changes through maker-checker (spec 2.5, 3; CONTRACT "External connector
 * changes"): a human proposes registering a capability's endpoint, or revoking it; a different
 * human approves with a step-up envelope, and the change takes effect at once. At most one
 * registration per capability is active, and at most one change per capability is pending.
 */
import { readReason, requireProposer, type GovernedKindDeps } from '../governance/maker-checker.js';
import { RegistryGovernance } from '../governance/governed-registry.js';
import type { PendingChange } from '../governance/change.js';
import { activeForProposal, RegistryApplier } from '../governance/registrations.js';
import type { Caller } from '../identity/caller.js';
import type { Egress } from '../egress/ports.js';
import { requireResolvingEndpoint } from '../egress/endpoint.js';
import type { ExternalConnectorStore } from './ports.js';
import {
  describeChange,
  EXTERNAL_CONNECTOR_CHANGE_KIND,
  readProposal,
  toChangeView,
  type ExternalConnectorChangePayload,
  type ExternalConnectorChangeView,
  type ExternalConnectorRegistration,
  type NamespaceOwner,
} from './registration.js';

export interface ExternalConnectorGovernanceDeps extends GovernedKindDeps {
  registrations: ExternalConnectorStore;
  egress: Pick<Egress, 'check'>;
  /** Who owns a namespace when another kind of connector does (built in, reserved, MCP servers): no registration may use it. */
  namespaceOwner: NamespaceOwner;
}

const registrationOf = (change: PendingChange<ExternalConnectorChangePayload>): ExternalConnectorRegistration => {
  const p = change.payload as Extract<ExternalConnectorChangePayload, { kind: 'register' }>;
  return {
    registrationId: change.id,
    capability: p.capability,
    endpoint: p.endpoint,
    policyName: p.policyName,
    forwardedParameters: p.forwardedParameters,
    timeoutMs: p.timeoutMs,
    proposer: change.proposer,
    approvedBy: change.decider!,
    registeredAt: change.decidedAt!,
  };
};

export class ExternalConnectorGovernance extends RegistryGovernance<ExternalConnectorChangePayload, ExternalConnectorChangeView, ExternalConnectorRegistration> {
  constructor(private readonly deps: ExternalConnectorGovernanceDeps) {
    super(
      deps,
      {
        kind: EXTERNAL_CONNECTOR_CHANGE_KIND,
        applier: new RegistryApplier(deps.registrations, registrationOf, (c) => `Capability '${c.payload.capability}'`),
        describe: describeChange,
        toView: toChangeView,
      },
      deps.registrations,
    );
  }

  async propose(caller: Caller, body: unknown): Promise<ExternalConnectorChangeView> {
    requireProposer(caller);
    const input = readProposal(body, this.deps.namespaceOwner);
    const reason = readReason((body as Record<string, unknown>).reason);
    const capability = input.kind === 'register' ? input.payload.capability : input.capability;
    if (input.kind === 'register') await requireResolvingEndpoint(this.deps.egress, input.payload.endpoint);
    const active = await activeForProposal(this.deps.registrations, capability, input.kind, `Capability '${capability}'`);
    const payload: ExternalConnectorChangePayload =
      input.kind === 'register' ? { kind: 'register', ...input.payload } : { kind: 'revoke', capability, registrationId: active!.registrationId };
    return this.proposeChange(caller, { payload, subject: capability, reason });
  }
}

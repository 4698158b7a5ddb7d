/**
 * Business signal source changes through maker-checker (CONTRACT "Business signal sources"): a
 * human proposes registering a source (name, https endpoint, optional Ed25519 key) or revoking it;
 * a different human approves with a step-up envelope, and the change takes effect at once. At
 * most one source per name is active, and at most one change per name is pending.
 */
import { readReason, requireProposer, type GovernedKindDeps } from '../governance/maker-checker.js';
import { RegistryGovernance } from '../governance/governed-registry.js';
import { activeForProposal, RegistryApplier } from '../governance/registrations.js';
import type { Caller } from '../identity/caller.js';
import type { Egress } from '../egress/ports.js';
import { requireResolvingEndpoint } from '../egress/endpoint.js';
import type { SignalSourceRegistration, SignalSourceStore, SourceProofVerifier } from './ports.js';
import {
  describeSourceChange,
  readSourceProposal,
  SIGNAL_SOURCE_CHANGE_KIND,
  sourceRegistrationOf,
  toSourceChangeView,
  type SignalSourceChangePayload,
  type SignalSourceChangeView,
} from './sources.js';

export interface SignalSourceGovernanceDeps extends GovernedKindDeps {
  sources: SignalSourceStore;
  egress: Pick<Egress, 'check'>;
  keys: Pick<SourceProofVerifier, 'keyIdOf'>;
}

export class SignalSourceGovernance extends RegistryGovernance<SignalSourceChangePayload, SignalSourceChangeView, SignalSourceRegistration> {
  constructor(private readonly deps: SignalSourceGovernanceDeps) {
    super(
      deps,
      {
        kind: SIGNAL_SOURCE_CHANGE_KIND,
        applier: new RegistryApplier(deps.sources, sourceRegistrationOf, (c) => `Business signal source '${c.payload.name}'`),
        describe: describeSourceChange,
        toView: toSourceChangeView,
      },
      deps.sources,
    );
  }

  async propose(caller: Caller, body: unknown): Promise<SignalSourceChangeView> {
    requireProposer(caller);
    const input = readSourceProposal(body, this.deps.keys);
    const reason = readReason((body as Record<string, unknown>).reason);
    const name = input.kind === 'register' ? input.payload.name : input.name;
    if (input.kind === 'register') await requireResolvingEndpoint(this.deps.egress, input.payload.endpoint);
    const active = await activeForProposal(this.deps.sources, name, input.kind, `Business signal source '${name}'`);
    const payload: SignalSourceChangePayload =
      input.kind === 'register' ? { kind: 'register', ...input.payload } : { kind: 'revoke', name, registrationId: active!.registrationId };
    return this.proposeChange(caller, { payload, subject: name, reason });
  }
}

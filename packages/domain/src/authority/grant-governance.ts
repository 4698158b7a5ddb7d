/**
 * Authority grant changes through maker-checker (CONTRACT "Authority grants"): a human proposes a
 * grant or the revoke of one; a different human approves with a step-up envelope, and the change
 * takes effect at once. Neither the proposer nor the approver of a grant may be its grantee.
 */
import type { PendingChange } from '../governance/change.js';
import { readReason, requireProposer, type GovernedKindDeps } from '../governance/maker-checker.js';
import { RegistryGovernance } from '../governance/governed-registry.js';
import type { ChangeApplier } from '../governance/ports.js';
import type { Caller } from '../identity/caller.js';
import { conflict, forbidden } from '../shared/errors.js';
import type { AuthorityGrantStore } from './ports.js';
import {
  AUTHORITY_GRANT_CHANGE_KIND,
  describeGrantChange,
  readGrantProposal,
  toGrantChangeView,
  type AuthorityGrant,
  type AuthorityGrantChangePayload,
  type AuthorityGrantChangeView,
} from './grants.js';

export interface AuthorityGrantGovernanceDeps extends GovernedKindDeps {
  grants: AuthorityGrantStore;
  /** How many days ahead a grant may expire (SVC_GRANT_MAX_DAYS). */
  maxGrantDays: number;
}

const selfGrant = (): never => {
  throw forbidden('Nobody grants authority to themselves: the grantee may neither propose nor approve its own grant.', 'SELF_GRANT_DENIED');
};

class GrantApplier implements ChangeApplier<AuthorityGrantChangePayload> {
  constructor(private readonly grants: AuthorityGrantStore) {}

  async apply(change: PendingChange<AuthorityGrantChangePayload>): Promise<void> {
    const p = change.payload;
    if (p.kind === 'revoke') return this.grants.revoke(p.grantId, change.decidedAt!, change.id);
    await this.grants.activate({
      grantId: change.id,
      grantee: p.grantee,
      action: p.action,
      limits: p.limits,
      expiresAt: p.expiresAt,
      proposer: change.proposer,
      approvedBy: change.decider!,
      grantedAt: change.decidedAt!,
    });
  }
}

export class AuthorityGrantGovernance extends RegistryGovernance<AuthorityGrantChangePayload, AuthorityGrantChangeView, AuthorityGrant> {
  constructor(private readonly deps: AuthorityGrantGovernanceDeps) {
    super(
      deps,
      {
        kind: AUTHORITY_GRANT_CHANGE_KIND,
        applier: new GrantApplier(deps.grants),
        describe: describeGrantChange,
        toView: toGrantChangeView,
        checkDecider: (change, checker) => {
          if (change.payload.kind === 'grant' && change.payload.grantee === checker.callerId) selfGrant();
        },
      },
      { listActive: (page, pageSize) => deps.grants.listInForce(deps.clock.now().toISOString(), page, pageSize) },
    );
  }

  async propose(caller: Caller, body: unknown): Promise<AuthorityGrantChangeView> {
    requireProposer(caller);
    const input = readGrantProposal(body, this.deps.clock.now(), this.deps.maxGrantDays);
    const reason = readReason((body as Record<string, unknown>).reason);
    if (input.kind === 'grant') {
      if (input.payload.grantee === caller.callerId) selfGrant();
      return this.proposeChange(caller, { payload: { kind: 'grant', ...input.payload }, reason });
    }
    const grant = await this.deps.grants.get(input.grantId);
    if (!grant || grant.revokedAt !== undefined) throw conflict(`Authority grant '${input.grantId}' is unknown or already revoked; there is nothing to revoke.`);
    return this.proposeChange(caller, {
      payload: { kind: 'revoke', grantId: grant.grantId, grantee: grant.grantee, action: grant.action },
      subject: `revoke ${grant.grantId}`,
      reason,
    });
  }
}

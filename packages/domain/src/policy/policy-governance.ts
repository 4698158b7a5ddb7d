import type { Page } from '../ports/page.js';
/**
 * Policy changes through maker-checker (CONTRACT "Governance"): proposing to publish a new policy
 * version, and publishing it once a second human approves it. A published version never changes.
 */
import { makerCheckerFor, readReason, readStatusFilter, requireProposer, type GovernedKindDeps, type MakerChecker } from '../governance/maker-checker.js';
import type { ChangeStatus, PendingChange } from '../governance/change.js';
import { SYSTEM_PROPOSER } from '../governance/change.js';
import type { ChangeApplier } from '../governance/ports.js';
import type { Caller } from '../identity/caller.js';
import type { Hasher } from '../ports/crypto.js';
import { conflict, invalid, isDomainError } from '../shared/errors.js';
import { isDotOnly, type PolicyDocument, type PolicyRef } from './document.js';
import { policyNotFound, type PolicyStore } from './policy-version.js';
import { validateNewPolicyVersion } from './validate.js';
import { isPlainObject } from '../shared/guards.js';
import { readName } from '../shared/names.js';

export const POLICY_CHANGE_KIND = 'policy';

/** What a pending policy change proposes. */
export interface PolicyChangePayload {
  policyName: string;
  /** The version it replaces, or its own version for a first one. */
  baseVersion: string;
  policyVersion: string;
  contentHash: string;
  content: PolicyDocument;
}

/** A pending policy change as the API shows it (CONTRACT "Governance"). */
export interface PolicyChangeView {
  id: string;
  policyName: string;
  baseVersion: string;
  policyVersion: string;
  status: ChangeStatus;
  proposer: string;
  reason: string | null;
  createdAt: string;
  decider?: string;
  decidedAt?: string;
  rejectionReason?: string;
  /** When the approved version was published. */
  appliedAt?: string;
  contentHash: string;
  proposedContent: PolicyDocument;
}

export type ShippedPolicyOutcome =
  | { outcome: 'proposed'; change: PolicyChangeView }
  | { outcome: 'published' | 'pending' | 'proposed-before' }
  | { outcome: 'invalid'; errors: string[] };

export interface PolicyGovernanceDeps extends GovernedKindDeps {
  policies: PolicyStore;
  hasher: Hasher;
}


/** Pending changes of one policy version are exclusive: `<name>/<version>` (neither can hold '/'). */
const subjectOf = (ref: PolicyRef): string => `${ref.name}/${ref.version}`;

export function toPolicyChangeView(c: PendingChange<PolicyChangePayload>): PolicyChangeView {
  return {
    id: c.id,
    policyName: c.payload.policyName,
    baseVersion: c.payload.baseVersion,
    policyVersion: c.payload.policyVersion,
    status: c.status,
    proposer: c.proposer,
    reason: c.reason ?? null,
    createdAt: c.createdAt,
    ...(c.decider !== undefined ? { decider: c.decider } : {}),
    ...(c.decidedAt !== undefined ? { decidedAt: c.decidedAt } : {}),
    ...(c.rejectionReason !== undefined ? { rejectionReason: c.rejectionReason } : {}),
    ...(c.appliedAt !== undefined ? { appliedAt: c.appliedAt } : {}),
    contentHash: c.payload.contentHash,
    proposedContent: c.payload.content,
  };
}

const describe = (c: PendingChange<PolicyChangePayload>): string =>
  `publish policy '${c.payload.policyName}' version '${c.payload.policyVersion}' (base '${c.payload.baseVersion}', contentHash ${c.payload.contentHash})`;

/** Publishing an approved version; publishing it again for the same change is a no-op. */
class PolicyPublisher implements ChangeApplier<PolicyChangePayload> {
  constructor(private readonly policies: PolicyStore) {}

  async apply(change: PendingChange<PolicyChangePayload>): Promise<void> {
    const p = change.payload;
    const stored = await this.policies.publish({
      name: p.policyName,
      version: p.policyVersion,
      content: p.content,
      contentHash: p.contentHash,
      changeId: change.id,
      proposer: change.proposer,
      approvedBy: change.decider!,
      approvedAt: change.decidedAt!,
    });
    if (stored.changeId !== change.id) {
      throw conflict(`Policy '${p.policyName}' version '${p.policyVersion}' was already published by change '${stored.changeId}'; a published version never changes.`);
    }
  }
}

export class PolicyGovernance {
  readonly changes: MakerChecker<PolicyChangePayload>;

  constructor(private readonly deps: PolicyGovernanceDeps) {
    this.changes = makerCheckerFor<PolicyChangePayload>(POLICY_CHANGE_KIND, deps, { applier: new PolicyPublisher(deps.policies), describe });
  }

  /**
   * `POST /policies/{name}/{version}/pending-changes` with `{proposedContent, reason}`: proposes
   * publishing `proposedContent` as version `proposedContent.policyVersion` of `name`; `version` is
   * the published version it replaces, or the proposed version itself for a first one.
   */
  async propose(caller: Caller, name: string, version: string, body: unknown): Promise<PolicyChangeView> {
    requireProposer(caller);
    if (isDotOnly(name)) throw invalid("The policy name must not be '.' or '..'.");
    if (isDotOnly(version)) throw invalid("The policy version must not be '.' or '..'.");
    readName('policyName', name, 'The policy name in the path');
    readName('policyVersion', version, 'The policy version in the path');
    if (!isPlainObject(body)) throw invalid('The body must be a JSON object: {"proposedContent": <policy document>, "reason": "…"}.');
    const reason = readReason(body.reason);
    const content = body.proposedContent;
    if (!isPlainObject(content)) throw invalid('proposedContent is required: the policy document to publish.');
    if (typeof content.policyVersion === 'string' && isDotOnly(content.policyVersion)) {
      throw invalid("proposedContent.policyVersion must not be '.' or '..'.");
    }
    if (content.name !== name) throw invalid(`proposedContent.name must be '${name}', the policy name in the path.`);
    const { valid, errors } = validateNewPolicyVersion(content);
    if (!valid) throw invalid(`The policy document is invalid: ${errors.join('; ')}`);
    const doc = content as unknown as PolicyDocument;
    const ref = { name, version: doc.policyVersion };
    if (version !== doc.policyVersion && !(await this.deps.policies.find({ name, version }))) {
      throw policyNotFound({ name, version });
    }
    await this.refuseIfTaken(ref);
    const change = await this.changes.propose(caller, {
      payload: this.payload(doc, version),
      subject: subjectOf(ref),
      reason,
    });
    return toPolicyChangeView(change);
  }

  /**
   * A policy shipped with the product: proposed by `system`, in effect only once a human approves
   * it. Idempotent across restarts (and simultaneous starts): nothing is proposed when that name
   * and version is published, pending, or was proposed by the system with this content before
   * (and rejected).
   */
  async proposeShipped(document: unknown, source: string): Promise<ShippedPolicyOutcome> {
    const { valid, errors } = validateNewPolicyVersion(document);
    if (!valid) return { outcome: 'invalid', errors };
    const doc = document as PolicyDocument;
    const ref = { name: doc.name, version: doc.policyVersion };
    if (await this.deps.policies.find(ref)) return { outcome: 'published' };
    const contentHash = this.deps.hasher.contentHash(doc);
    const earlier = await this.deps.changes.list({ kind: POLICY_CHANGE_KIND, subject: subjectOf(ref) });
    if (earlier.some((c) => c.status === 'PENDING_APPROVAL')) return { outcome: 'pending' };
    if (earlier.some((c) => c.proposer === SYSTEM_PROPOSER && (c.payload as PolicyChangePayload).contentHash === contentHash)) {
      return { outcome: 'proposed-before' };
    }
    const base = (await this.deps.policies.inEffect()).find((p) => p.name === doc.name)?.version ?? doc.policyVersion;
    try {
      const change = await this.changes.proposeAsSystem({
        payload: this.payload(doc, base),
        subject: subjectOf(ref),
        reason: `Shipped with the product (${source}).`,
      });
      return { outcome: 'proposed', change: toPolicyChangeView(change) };
    } catch (e) {
      // Another instance proposed it at the same moment.
      if (isDomainError(e) && e.kind === 'conflict') return { outcome: 'pending' };
      throw e;
    }
  }

  /** One page of the policy changes, oldest first. */
  async list(query: { status?: unknown; page: number; pageSize: number }): Promise<Page<PolicyChangeView>> {
    const found = await this.changes.page(readStatusFilter(query.status), query.page, query.pageSize);
    return { ...found, items: found.items.map(toPolicyChangeView) };
  }

  async approve(id: string, checker: Caller, envelope: unknown): Promise<PolicyChangeView> {
    return toPolicyChangeView(await this.changes.approve(id, checker, envelope));
  }

  async reject(id: string, checker: Caller, envelope: unknown): Promise<PolicyChangeView> {
    return toPolicyChangeView(await this.changes.reject(id, checker, envelope));
  }

  private payload(doc: PolicyDocument, baseVersion: string): PolicyChangePayload {
    return {
      policyName: doc.name,
      baseVersion,
      policyVersion: doc.policyVersion,
      contentHash: this.deps.hasher.contentHash(doc),
      content: doc,
    };
  }

  /** 409 when the version is already published (versions never change) or already has a pending change. */
  private async refuseIfTaken(ref: PolicyRef): Promise<void> {
    if (await this.deps.policies.find(ref)) {
      throw conflict(`Policy '${ref.name}' version '${ref.version}' is already published, and a published version never changes; propose a new version.`);
    }
    const pending = await this.changes.pendingFor(subjectOf(ref));
    if (pending) throw conflict(`Policy '${ref.name}' version '${ref.version}' already has a pending change ('${pending.id}'); approve or reject it first.`);
  }
}

/**
 * The maker-checker state machine, generic over the kind of change:
 *
 *   PENDING_APPROVAL --approve (checker ≠ proposer, valid unused envelope)--> APPROVED, then applied
 *   PENDING_APPROVAL --reject  (checker ≠ proposer, valid unused envelope, reason)--> REJECTED
 *   APPROVED or REJECTED --approve | reject--> unchanged, 409
 *
 * A decision is two steps: (a) one atomic store call consumes the envelope's nonce and
 * compare-and-sets PENDING_APPROVAL → decided (so of two simultaneous decisions, in one process or
 * several, exactly one wins), stores the decision's signed governance event with it (signed
 * before, kept only by the winner: the event exists if and only if the decision does; a proposal
 * and its event likewise), and an approval takes the apply claim with it; (b) the claimant runs
 * the kind's applier, idempotently, and marks the change applied. If (b) fails after (a), the
 * claimant gives the claim back and the change stays APPROVED without `appliedAt`; a new valid
 * envelope from the same approver then takes the claim, performs (b) and answers 200, while anyone
 * else gets 409. A claim is a lease (`APPLY_LEASE_MS`), so a claimant whose process stopped does not
 * hold it forever. Requests of the same approver that arrive while the claimant is still applying
 * find the claim held and get 409: only the claimant answers 200.
 */
import { isVerifiedHuman, type Caller } from '../identity/caller.js';
import type { ApproverDirectory } from '../ports/callers.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { StepUpSignatureVerifier } from '../ports/crypto.js';
import type { Page } from '../ports/page.js';
import { conflict, DomainError, forbidden, invalid, notFound } from '../shared/errors.js';
import {
  charLength,
  isChangeStatus,
  REASON_MAX_LENGTH,
  SYSTEM_PROPOSER,
  CHANGE_STATUSES,
  type ChangeStatus,
  type DecisionAction,
  type PendingChange,
} from './change.js';
import type { GovernanceAudit } from './governance-audit.js';
import type { ApplyClaim, ChangeApplier, PendingChangeStore } from './ports.js';
import { checkStepUpEnvelope, readStepUpEnvelope } from './step-up.js';
import type { PendingItemNotifier } from '../notifications/pending-items.js';

/**
 * How long the apply claim of a decision stays with its request. Applying is a few statements; the
 * lease only matters when the claimant's process stopped mid-way, and is how long the approver's
 * retry then waits.
 */
export const APPLY_LEASE_MS = 60_000;

export interface MakerCheckerDeps<P> {
  /** The kind of change this instance governs (`policy`, …). */
  kind: string;
  store: PendingChangeStore;
  applier: ChangeApplier<P>;
  stepUpVerifier: StepUpSignatureVerifier;
  /** The step-up keys callers hold now: a checker holding one of the proposer's is the proposer. */
  approvers: ApproverDirectory;
  clock: Clock;
  ids: IdGenerator;
  audit: GovernanceAudit;
  /** One line saying what the change does, for audit events and notifications (`publish policy 'x' version '2'`). */
  describe(change: PendingChange<P>): string;
  /** Announces each new change (CONTRACT "Notifications"); none when absent. */
  notifier?: PendingItemNotifier;
  /**
   * The kind's own refusal of a checker, after the shared ones (a grantee may not approve a grant
   * of their own): throws a DomainError, before anything is stored.
   */
  checkDecider?(change: PendingChange<P>, checker: Caller): void;
}

/** What every kind of governed change shares: the change store, step-up checks, time, ids, audit. */
export interface GovernedKindDeps {
  changes: PendingChangeStore;
  stepUpVerifier: StepUpSignatureVerifier;
  approvers: ApproverDirectory;
  clock: Clock;
  ids: IdGenerator;
  audit: GovernanceAudit;
  /** Announces each new change to the configured webhooks; none when absent. */
  notifier?: PendingItemNotifier;
}

/** The maker-checker of one kind of change, from the shared parts and the kind's own. */
export function makerCheckerFor<P>(
  kind: string,
  deps: GovernedKindDeps,
  own: Pick<MakerCheckerDeps<P>, 'applier' | 'describe' | 'checkDecider'>,
): MakerChecker<P> {
  const { changes, stepUpVerifier, approvers, clock, ids, audit, notifier } = deps;
  return new MakerChecker<P>({ kind, store: changes, stepUpVerifier, approvers, clock, ids, audit, notifier, ...own });
}

/** Spec 5.9: proposing needs a USER key. */
export function requireProposer(caller: Caller): void {
  if (!isVerifiedHuman(caller)) {
    throw forbidden('Only a verified human (a USER key) may propose changes.', 'NON_HUMAN_CALLER_DENIED');
  }
}

/** Spec 5.9: deciding needs a USER key with a registered step-up key. */
export function requireChecker(caller: Caller): void {
  if (!isVerifiedHuman(caller) || !caller.stepUpPublicKeyPem) {
    throw forbidden(
      'Only a verified human with a registered step-up key (a USER key with a step-up public key) may approve or reject changes.',
      'NON_HUMAN_CALLER_DENIED',
    );
  }
}

/** The optional proposal reason: a string of at most 2000 characters (spec 8). */
export function readReason(reason: unknown): string | undefined {
  if (reason === undefined || reason === null) return undefined;
  if (typeof reason !== 'string') throw invalid('reason must be a string.');
  if (charLength(reason) > REASON_MAX_LENGTH) throw invalid(`reason must be at most ${REASON_MAX_LENGTH} characters.`);
  return reason;
}

/** The `status` filter of a listing: absent, or one of the statuses (400 otherwise). */
export function readStatusFilter(status: unknown): ChangeStatus | undefined {
  if (status === undefined) return undefined;
  if (!isChangeStatus(status)) throw invalid(`status must be one of ${CHANGE_STATUSES.join(', ')}.`);
  return status;
}

export class MakerChecker<P> {
  constructor(private readonly deps: MakerCheckerDeps<P>) {}

  get kind(): string {
    return this.deps.kind;
  }

  /** A human proposes. Returns the stored PENDING_APPROVAL change. */
  async propose(caller: Caller, input: { payload: P; subject?: string; reason?: string }): Promise<PendingChange<P>> {
    requireProposer(caller);
    const stepUpKey = caller.stepUpPublicKeyPem === undefined ? undefined : this.deps.stepUpVerifier.publicKeyOf(caller.stepUpPublicKeyPem);
    return this.create(caller.callerId, input, stepUpKey);
  }

  /** The product proposes (shipped policies): proposer `system`, approved by a human like any other. */
  proposeAsSystem(input: { payload: P; subject?: string; reason?: string }): Promise<PendingChange<P>> {
    return this.create(SYSTEM_PROPOSER, input, undefined);
  }

  /** The PENDING_APPROVAL change of this kind for `subject`, if any. */
  async pendingFor(subject: string): Promise<PendingChange<P> | undefined> {
    const [found] = await this.deps.store.list({ kind: this.deps.kind, status: 'PENDING_APPROVAL', subject });
    return found as PendingChange<P> | undefined;
  }

  /** One page of this kind's changes, oldest first (CONTRACT "Requests, reads and lists"). */
  async page(status: ChangeStatus | undefined, page: number, pageSize: number): Promise<Page<PendingChange<P>>> {
    return (await this.deps.store.page({ kind: this.deps.kind, status }, page, pageSize)) as Page<PendingChange<P>>;
  }

  approve(id: string, checker: Caller, envelope: unknown): Promise<PendingChange<P>> {
    return this.decide(id, 'approve', checker, envelope);
  }

  reject(id: string, checker: Caller, envelope: unknown): Promise<PendingChange<P>> {
    return this.decide(id, 'reject', checker, envelope);
  }

  private async create(proposer: string, input: { payload: P; subject?: string; reason?: string }, proposerStepUpKey: string | undefined): Promise<PendingChange<P>> {
    const reason = readReason(input.reason);
    const now = this.deps.clock.now();
    const change: PendingChange<P> = {
      id: this.deps.ids.uuid(),
      kind: this.deps.kind,
      ...(input.subject !== undefined ? { subject: input.subject } : {}),
      payload: input.payload,
      status: 'PENDING_APPROVAL',
      proposer,
      ...(proposerStepUpKey !== undefined ? { proposerStepUpKey } : {}),
      ...(reason !== undefined ? { reason } : {}),
      createdAt: now.toISOString(),
    };
    const summary = this.deps.describe(change);
    const event = await this.deps.audit.sign({ callerId: proposer, action: 'propose', subjectType: this.subjectType, subjectId: change.id, summary }, now);
    // Written in the proposal's own commit: announced if and only if it is stored.
    const notices = this.deps.notifier?.noticesOf({ kind: this.deps.kind, id: change.id, summary, createdAt: change.createdAt }) ?? [];
    if (!(await this.deps.store.create(change, event, notices))) {
      throw conflict(`A pending change for ${input.subject ?? 'this subject'} already exists; approve or reject it first.`);
    }
    return change;
  }

  private get subjectType(): string {
    return `${this.deps.kind}-change`;
  }

  private async decide(id: string, action: DecisionAction, checker: Caller, body: unknown): Promise<PendingChange<P>> {
    requireChecker(checker);
    const now = this.deps.clock.now();
    const envelope = readStepUpEnvelope(body, action, now);
    checkStepUpEnvelope(envelope, { changeId: id, action, checker, now }, this.deps.stepUpVerifier);

    const found = await this.get(id);
    if (found.proposer === checker.callerId || this.holdsProposersKey(found, checker)) {
      throw forbidden('The proposer of a change cannot approve or reject it; another human must decide.', 'SELF_APPROVAL_DENIED');
    }
    this.deps.checkDecider?.(found, checker);
    if (found.status !== 'PENDING_APPROVAL' && !this.completable(found, action, checker)) throw alreadyDecided(found);

    // Step (a): consume the nonce and compare-and-set the status, atomically, with the decision's
    // signed event (signed first, stored in the same transaction); an approval takes the apply claim.
    const claim = action === 'approve' ? this.newClaim(now) : undefined;
    const summary = this.deps.describe(found);
    const event = await this.deps.audit.sign(
      { callerId: checker.callerId, action, subjectType: this.subjectType, subjectId: id, summary: action === 'reject' ? `${summary}; rejected: ${envelope.payload.reason}` : summary },
      now,
    );
    const result = await this.deps.store.decide({
      id,
      kind: this.deps.kind,
      decision: action === 'approve' ? 'APPROVED' : 'REJECTED',
      decider: checker.callerId,
      decidedAt: now.toISOString(),
      ...(action === 'reject' ? { rejectionReason: envelope.payload.reason } : {}),
      nonce: envelope.payload.nonce,
      ...(claim ? { applyClaim: claim } : {}),
      event,
    });
    if (!result.nonceFresh) {
      throw conflict('The step-up envelope nonce has been used before; sign a new envelope.', 'STEP_UP_NONCE_REUSED');
    }
    const change = result.change as PendingChange<P> | undefined;
    if (!change) throw changeNotFound(id);
    if (result.decided) return claim ? this.apply(change, claim) : change;
    // Lost the compare-and-set, or the change was approved by this checker and not applied yet:
    // completing it needs the apply claim, which a request still applying it holds.
    if (!claim || !this.completable(change, action, checker)) throw alreadyDecided(change);
    const completing = await this.deps.audit.sign(
      { callerId: checker.callerId, action, subjectType: this.subjectType, subjectId: id, summary: `${summary}; completing an approval that was not applied` },
      now,
    );
    const claimed = await this.deps.store.claimApply({ id, kind: this.deps.kind, decider: checker.callerId, claim, now: now.toISOString(), event: completing });
    if (!claimed) throw alreadyDecided(change);
    return this.apply(change, claim);
  }

  /**
   * One step-up key is one person (CONTRACT "Review rules, round 2"): a checker whose key is the one
   * the proposer held when proposing, or holds now, is the proposer under another caller id. Keys
   * are compared as keys, not as PEM text.
   */
  private holdsProposersKey(change: PendingChange<P>, checker: Caller): boolean {
    const key = (pem: string) => this.deps.stepUpVerifier.publicKeyOf(pem);
    const mine = checker.stepUpPublicKeyPem === undefined ? undefined : key(checker.stepUpPublicKeyPem);
    if (mine === undefined) return false;
    return mine === change.proposerStepUpKey || this.deps.approvers.stepUpKeysOf(change.proposer).some((pem) => key(pem) === mine);
  }

  private newClaim(now: Date): ApplyClaim {
    return { token: this.deps.ids.uuid(), until: new Date(now.getTime() + APPLY_LEASE_MS).toISOString() };
  }

  /**
   * Step (b), by the holder of the apply claim: apply idempotently, then mark applied. On failure the
   * claim is given back, so that the approver's retry can complete at once.
   */
  private async apply(change: PendingChange<P>, claim: ApplyClaim): Promise<PendingChange<P>> {
    let marked: boolean;
    try {
      await this.deps.applier.apply(change);
      marked = await this.deps.store.markApplied(change.id, this.deps.clock.now().toISOString(), claim.token);
    } catch (e) {
      // The failure is what the caller must see; a claim that cannot be given back ends with its lease.
      await this.deps.store.releaseApply(change.id, claim.token).catch(() => undefined);
      throw e;
    }
    const stored = (await this.deps.store.get(change.id)) as PendingChange<P> | undefined;
    // Not marked: this request's lease ran out and the approver's retry took the claim over; that
    // request answers 200.
    if (!marked || !stored) throw alreadyDecided(stored ?? change);
    return stored;
  }

  /** An approval by this checker that was decided (step a) but not applied (step b). */
  private completable(change: PendingChange<P>, action: DecisionAction, checker: Caller): boolean {
    return action === 'approve' && change.status === 'APPROVED' && change.decider === checker.callerId && change.appliedAt === undefined;
  }

  private async get(id: string): Promise<PendingChange<P>> {
    const change = await this.deps.store.get(id);
    if (!change || change.kind !== this.deps.kind) throw changeNotFound(id);
    return change as PendingChange<P>;
  }
}

const changeNotFound = (id: string): DomainError => notFound(`Pending change '${id}' was not found.`);

/** Spec 7: 409 without a code. */
const alreadyDecided = (change: PendingChange<unknown>): DomainError =>
  conflict(`Pending change '${change.id}' is already decided (${change.status}).`);

/**
 * The maker-checker state machine, generic over the kind of change:
 *
 *   PENDING_APPROVAL --approve (checker ≠ proposer, valid unused envelope)--> APPROVED, then applied
 *   PENDING_APPROVAL --reject  (checker ≠ proposer, valid unused envelope, reason)--> REJECTED
 *   APPROVED or REJECTED --approve | reject--> unchanged, 409
 *
 * A decision is two steps: (a) one atomic store call consumes the envelope's nonce and
 * compare-and-sets PENDING_APPROVAL → decided (so of two simultaneous decisions, in one process or
 * several, exactly one wins); (b) the kind's applier makes the change take effect, idempotently,
 * and the change is marked applied. If (b) fails after (a), the change stays APPROVED without
 * `appliedAt`; a new valid envelope from the same approver then performs (b) and answers 200, while
 * anyone else gets 409.
 */
import { isVerifiedHuman, type Caller } from '../identity/caller.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { StepUpSignatureVerifier } from '../ports/crypto.js';
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
import type { ChangeApplier, PendingChangeStore } from './ports.js';
import { checkStepUpEnvelope, readStepUpEnvelope } from './step-up.js';

export interface MakerCheckerDeps<P> {
  /** The kind of change this instance governs (`policy`, …). */
  kind: string;
  store: PendingChangeStore;
  applier: ChangeApplier<P>;
  stepUpVerifier: StepUpSignatureVerifier;
  clock: Clock;
  ids: IdGenerator;
  audit: GovernanceAudit;
  /** One line saying what the change does, for audit events (`publish policy 'x' version '2'`). */
  describe(change: PendingChange<P>): string;
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
    return this.create(caller.callerId, input);
  }

  /** The product proposes (shipped policies): proposer `system`, approved by a human like any other. */
  proposeAsSystem(input: { payload: P; subject?: string; reason?: string }): Promise<PendingChange<P>> {
    return this.create(SYSTEM_PROPOSER, input);
  }

  /** The PENDING_APPROVAL change of this kind for `subject`, if any. */
  async pendingFor(subject: string): Promise<PendingChange<P> | undefined> {
    const [found] = await this.deps.store.list({ kind: this.deps.kind, status: 'PENDING_APPROVAL', subject });
    return found as PendingChange<P> | undefined;
  }

  async list(status?: ChangeStatus): Promise<PendingChange<P>[]> {
    return (await this.deps.store.list({ kind: this.deps.kind, status })) as PendingChange<P>[];
  }

  approve(id: string, checker: Caller, envelope: unknown): Promise<PendingChange<P>> {
    return this.decide(id, 'approve', checker, envelope);
  }

  reject(id: string, checker: Caller, envelope: unknown): Promise<PendingChange<P>> {
    return this.decide(id, 'reject', checker, envelope);
  }

  private async create(proposer: string, input: { payload: P; subject?: string; reason?: string }): Promise<PendingChange<P>> {
    const reason = readReason(input.reason);
    const change: PendingChange<P> = {
      id: this.deps.ids.uuid(),
      kind: this.deps.kind,
      ...(input.subject !== undefined ? { subject: input.subject } : {}),
      payload: input.payload,
      status: 'PENDING_APPROVAL',
      proposer,
      ...(reason !== undefined ? { reason } : {}),
      createdAt: this.deps.clock.now().toISOString(),
    };
    if (!(await this.deps.store.create(change))) {
      throw conflict(`A pending change for ${input.subject ?? 'this subject'} already exists; approve or reject it first.`);
    }
    await this.deps.audit.record({ callerId: proposer, action: 'propose', subjectType: this.subjectType, subjectId: change.id, summary: this.deps.describe(change) });
    return change;
  }

  private get subjectType(): string {
    return `${this.deps.kind}-change`;
  }

  private async decide(id: string, action: DecisionAction, checker: Caller, body: unknown): Promise<PendingChange<P>> {
    requireChecker(checker);
    const envelope = readStepUpEnvelope(body, action);
    const now = this.deps.clock.now();
    checkStepUpEnvelope(envelope, { changeId: id, action, checker, now }, this.deps.stepUpVerifier);

    const found = await this.get(id);
    if (found.proposer === checker.callerId) {
      throw forbidden('The proposer of a change cannot approve or reject it; another human must decide.', 'SELF_APPROVAL_DENIED');
    }
    if (found.status !== 'PENDING_APPROVAL' && !this.completable(found, action, checker)) throw alreadyDecided(found);

    // Step (a): consume the nonce and compare-and-set the status, atomically.
    const result = await this.deps.store.decide({
      id,
      kind: this.deps.kind,
      decision: action === 'approve' ? 'APPROVED' : 'REJECTED',
      decider: checker.callerId,
      decidedAt: now.toISOString(),
      ...(action === 'reject' ? { rejectionReason: envelope.payload.reason } : {}),
      nonce: envelope.payload.nonce,
    });
    if (!result.nonceFresh) {
      throw conflict('The step-up envelope nonce has been used before; sign a new envelope.', 'STEP_UP_NONCE_REUSED');
    }
    const change = result.change as PendingChange<P> | undefined;
    if (!change) throw changeNotFound(id);
    const summary = this.deps.describe(change);
    if (result.decided) {
      await this.deps.audit.record({
        callerId: checker.callerId,
        action,
        subjectType: this.subjectType,
        subjectId: id,
        summary: action === 'reject' ? `${summary}; rejected: ${envelope.payload.reason}` : summary,
      });
      return action === 'approve' ? this.apply(change) : change;
    }
    // Lost the compare-and-set, or the change was approved by this checker and not applied yet.
    if (!this.completable(change, action, checker)) throw alreadyDecided(change);
    await this.deps.audit.record({
      callerId: checker.callerId,
      action,
      subjectType: this.subjectType,
      subjectId: id,
      summary: `${summary}; completing an approval that was not applied`,
    });
    return this.apply(change);
  }

  /** Step (b): apply idempotently, then mark applied. */
  private async apply(change: PendingChange<P>): Promise<PendingChange<P>> {
    await this.deps.applier.apply(change);
    const at = this.deps.clock.now().toISOString();
    await this.deps.store.markApplied(change.id, at);
    return ((await this.deps.store.get(change.id)) as PendingChange<P> | undefined) ?? { ...change, appliedAt: at };
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

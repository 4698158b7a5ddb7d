/**
 * What every governed registry shares (external connectors, business signal sources, authority
 * grants; CONTRACT "Governance"): changes proposed by one human and decided by another through the
 * maker-checker module, listed page by page with a status filter, and the entries in force. Each
 * kind brings only its own parts: how a proposal is read, what an approved change does, how a
 * change is shown.
 */
import type { Caller } from '../identity/caller.js';
import type { Page } from '../ports/page.js';
import type { ChangeStatus, PendingChange } from './change.js';
import { invalid } from '../shared/errors.js';
import { isPlainObject } from '../shared/guards.js';
import { makerCheckerFor, readStatusFilter, type GovernedKindDeps, type MakerChecker, type MakerCheckerDeps } from './maker-checker.js';

/** The routes of a governed registry: `/<area>/changes` (propose, list, approve, reject) and `GET /<area>`. */
export interface GovernedRegistry<View, Entry> {
  propose(caller: Caller, body: unknown): Promise<View>;
  list(query: { status?: unknown; page: number; pageSize: number }): Promise<Page<View>>;
  listActive(page: number, pageSize: number): Promise<Page<Entry>>;
  approve(id: string, checker: Caller, envelope: unknown): Promise<View>;
  reject(id: string, checker: Caller, envelope: unknown): Promise<View>;
}

/** The parts of a kind of change that are its own. */
export interface GovernedKind<P, View> extends Pick<MakerCheckerDeps<P>, 'applier' | 'describe' | 'checkDecider'> {
  kind: string;
  /** The change as the API shows it (a bare object). */
  toView(change: PendingChange<P>): View;
}

/**
 * The governance of one registry: everything but reading a proposal, which is the kind's own.
 * `entries` lists what is in force (`GET /<area>`).
 */
export abstract class RegistryGovernance<P, View, Entry> implements GovernedRegistry<View, Entry> {
  private readonly makerChecker: MakerChecker<P>;

  constructor(
    deps: GovernedKindDeps,
    private readonly kind: GovernedKind<P, View>,
    private readonly entries: { listActive(page: number, pageSize: number): Promise<Page<Entry>> },
  ) {
    this.makerChecker = makerCheckerFor<P>(kind.kind, deps, kind);
  }

  /** `POST /<area>/changes`: 201 with the change, or a 400 naming the field. */
  abstract propose(caller: Caller, body: unknown): Promise<View>;

  /** Stores a proposal read by `propose`, shown as the kind's view. */
  protected async proposeChange(caller: Caller, input: { payload: P; subject?: string; reason?: string }): Promise<View> {
    return this.kind.toView(await this.makerChecker.propose(caller, input));
  }

  /** `GET /<area>/changes`, oldest first. */
  async list(query: { status?: unknown; page: number; pageSize: number }): Promise<Page<View>> {
    const found = await this.makerChecker.page(readStatusFilter(query.status), query.page, query.pageSize);
    return { ...found, items: found.items.map((c) => this.kind.toView(c)) };
  }

  /** `GET /<area>`: what is in force. */
  listActive(page: number, pageSize: number): Promise<Page<Entry>> {
    return this.entries.listActive(page, pageSize);
  }

  async approve(id: string, checker: Caller, envelope: unknown): Promise<View> {
    return this.kind.toView(await this.makerChecker.approve(id, checker, envelope));
  }

  async reject(id: string, checker: Caller, envelope: unknown): Promise<View> {
    return this.kind.toView(await this.makerChecker.reject(id, checker, envelope));
  }
}

/**
 * The first rules of every registry's proposal: a JSON object (`shape` shows one in the message),
 * whose `kind` is one of `fields`' keys and whose every field is one of that kind's.
 */
export function readProposalFields<K extends string>(
  input: unknown,
  fields: Record<K, readonly string[]>,
  shape: string,
): { kind: K; body: Record<string, unknown> } {
  if (!isPlainObject(input)) throw invalid(`The body must be a JSON object: ${shape}.`);
  const kinds = Object.keys(fields) as K[];
  const kind = input.kind as K;
  if (!kinds.includes(kind)) throw invalid(`kind must be ${kinds.join(' or ')}.`);
  for (const field of Object.keys(input)) {
    if (!fields[kind].includes(field)) throw invalid(`${field} is not a field of a ${kind} proposal (fields: ${fields[kind].join(', ')}).`);
  }
  return { kind, body: input };
}

/** The common fields of a change's view (CONTRACT property names); the kind adds its payload's. */
/**
 * What the view of every registry change shows (external connectors, signal sources, MCP servers,
 * bare objects with the contract's property names): the change and, once decided, its decision.
 * Each registry adds what its register and revoke payloads hold.
 */
export interface RegistryChangeView {
  id: string;
  kind: 'register' | 'revoke';
  reason: string | null;
  proposer: string;
  status: ChangeStatus;
  createdAt: string;
  /** Revoke: the registration it ends. */
  registrationId?: string;
  decider?: string;
  decidedAt?: string;
  rejectionReason?: string;
  /** When the approved change took effect. */
  appliedAt?: string;
}

export function changeViewBase<K extends string>(c: PendingChange<{ kind: K }>) {
  return {
    id: c.id,
    kind: c.payload.kind,
    reason: c.reason ?? null,
    proposer: c.proposer,
    status: c.status,
    createdAt: c.createdAt,
  };
}

/** The decision fields of a change's view, present once decided. */
export function changeViewDecision(c: PendingChange<unknown>) {
  return {
    ...(c.decider !== undefined ? { decider: c.decider } : {}),
    ...(c.decidedAt !== undefined ? { decidedAt: c.decidedAt } : {}),
    ...(c.rejectionReason !== undefined ? { rejectionReason: c.rejectionReason } : {}),
    ...(c.appliedAt !== undefined ? { appliedAt: c.appliedAt } : {}),
  };
}

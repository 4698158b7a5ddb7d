/**
 * Registries whose entries are made and ended by governed changes (external connectors, business
 * signal sources): an approved register change activates an entry (its id is the change's id),
 * an approved revoke change ends it. Entries are never deleted, and at most one entry per key (a
 * capability, a source name) is active, whoever races: the store enforces it atomically.
 */
import type { Page } from '../ports/page.js';
import { ConnectorError } from '../execution/connectors.js';
import { conflict } from '../shared/errors.js';
import type { PendingChange } from './change.js';
import type { ChangeApplier } from './ports.js';

export interface Registration {
  /** The approved register change's id. */
  registrationId: string;
}

export interface RegistrationStore<R extends Registration> {
  /**
   * Stores the registration as active unless its key has another active one. Returns true when
   * this registration is stored (now, or by an earlier call: idempotent).
   */
  activate(registration: R): Promise<boolean>;
  /** Ends a registration; ending an ended one changes nothing. */
  revoke(registrationId: string, revokedAt: string, revokeChangeId: string): Promise<void>;
  /** The active registration of a key. */
  active(key: string): Promise<R | undefined>;
  /** Active registrations ordered by key. */
  listActive(page: number, pageSize: number): Promise<Page<R>>;
}

/** The payload of a change of a registry: a register of a new entry, or a revoke of the active one. */
export type RegistryChangePayload = { kind: 'register' } | { kind: 'revoke'; registrationId: string };

/**
 * At proposal: a register needs the key free, a revoke needs an active entry, which it names
 * (409 otherwise). Returns the active entry, if any.
 */
export async function activeForProposal<R extends Registration>(
  store: Pick<RegistrationStore<R>, 'active'>,
  key: string,
  kind: 'register' | 'revoke',
  what: string,
): Promise<R | undefined> {
  const active = await store.active(key);
  if (kind === 'register' && active) throw conflict(`${what} already has an active registration ('${active.registrationId}'); revoke it first.`);
  if (kind === 'revoke' && !active) throw conflict(`${what} has no active registration to revoke.`);
  return active;
}

/**
 * Before a release to a registered entry (an external connector, an MCP server): the registration
 * the request was decided with must still be the active one; revoked (or replaced) since, nothing
 * may be sent. Either failure is `before-send`.
 */
export async function stillActive<R extends Registration>(store: Pick<RegistrationStore<R>, 'active'>, key: string, registrationId: string, what: string): Promise<R> {
  let current: R | undefined;
  try {
    current = await store.active(key);
  } catch (e) {
    throw new ConnectorError('before-send', `The registration of ${what} could not be read again before release; nothing was sent.`, { cause: e });
  }
  if (current?.registrationId !== registrationId) throw new ConnectorError('before-send', `The registration of ${what} was revoked before release; nothing was sent.`);
  return current;
}

/** Applies an approved change of a registry; running it again for the same change changes nothing. */
export class RegistryApplier<P extends RegistryChangePayload, R extends Registration> implements ChangeApplier<P> {
  constructor(
    private readonly store: RegistrationStore<R>,
    /** The registration a register change makes (decided: `decider` and `decidedAt` are set). */
    private readonly registrationOf: (change: PendingChange<P>) => R,
    /** What the key is, for the conflict message (`Capability 'x'`). */
    private readonly what: (change: PendingChange<P>) => string,
  ) {}

  async apply(change: PendingChange<P>): Promise<void> {
    const p = change.payload;
    if (p.kind === 'revoke') return this.store.revoke((p as { registrationId: string }).registrationId, change.decidedAt!, change.id);
    if (!(await this.store.activate(this.registrationOf(change)))) {
      throw conflict(`${this.what(change)} already has another active registration; revoke it first.`);
    }
  }
}

/**
 * A RegistrationStore in memory: the reference behaviour of the port, for unit tests. Every method
 * does its work before its first await, so each call is atomic.
 */
export class InMemoryRegistrationStore<R extends Registration> implements RegistrationStore<R> {
  readonly rows = new Map<string, R & { revokedAt?: string; revokeChangeId?: string }>();

  constructor(private readonly keyOf: (r: R) => string) {}

  async activate(r: R): Promise<boolean> {
    if (this.rows.has(r.registrationId)) return true;
    if (this.activeRow(this.keyOf(r))) return false;
    this.rows.set(r.registrationId, structuredClone(r));
    return true;
  }

  async revoke(registrationId: string, revokedAt: string, revokeChangeId: string): Promise<void> {
    const row = this.rows.get(registrationId);
    if (row && row.revokedAt === undefined) Object.assign(row, { revokedAt, revokeChangeId });
  }

  async active(key: string): Promise<R | undefined> {
    const row = this.activeRow(key);
    return row ? this.strip(row) : undefined;
  }

  async listActive(page: number, pageSize: number): Promise<Page<R>> {
    const all = [...this.rows.values()]
      .filter((r) => r.revokedAt === undefined)
      .sort((a, b) => (this.keyOf(a) < this.keyOf(b) ? -1 : 1))
      .map((r) => this.strip(r));
    return { items: all.slice((page - 1) * pageSize, page * pageSize), page, pageSize, total: all.length };
  }

  private activeRow(key: string) {
    for (const row of this.rows.values()) if (this.keyOf(row) === key && row.revokedAt === undefined) return row;
    return undefined;
  }

  private strip(row: R & { revokedAt?: string; revokeChangeId?: string }): R {
    const { revokedAt: _r, revokeChangeId: _c, ...rest } = structuredClone(row);
    return rest as unknown as R;
  }
}

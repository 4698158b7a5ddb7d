import type { DataSource } from 'typeorm';
import type { AuthorityGrant, AuthorityGrantStore, GrantLimit, Page, SignalSourceRegistration, SignalSourceStore, SingleUseLedger } from '@ets/domain';
import { AuthorityGrantEntity, SignalSourceEntity, type AuthorityGrantRow, type SignalSourceRow } from '../entities/business-validation.js';
import { TypeOrmRegistrationStore } from './registration-table.js';
import { insertOrIgnore, revokeOnce } from './serial-writes.js';
import { storeBulk } from './store-transaction.js';
import { oneByOne, type BulkWork } from './pg-group-commit.js';

/** Business signal sources in `business_signal_sources`, at most one active per name. */
export class TypeOrmSignalSourceStore extends TypeOrmRegistrationStore<SignalSourceRegistration, SignalSourceRow> implements SignalSourceStore {
  constructor(ds: DataSource) {
    // The row is the registration and its revoke columns: nothing to convert.
    super(ds, SignalSourceEntity, {
      key: { property: 'name', column: 'name' },
      toRow: (r) => r,
      toRegistration: ({ revokedAt: _at, revokeChangeId: _by, ...r }) => r,
    });
  }
}

const toGrant = (r: AuthorityGrantRow): AuthorityGrant => ({
  grantId: r.grantId,
  grantee: r.grantee,
  action: r.action,
  limits: JSON.parse(r.limits) as GrantLimit[],
  expiresAt: r.expiresAt,
  proposer: r.proposer,
  approvedBy: r.approvedBy,
  grantedAt: r.grantedAt,
  ...(r.revokedAt !== null ? { revokedAt: r.revokedAt } : {}),
});

/** Authority grants in `authority_grants`. Times are ISO 8601 UTC (`toISOString`), so they compare as text. */
export class TypeOrmAuthorityGrantStore implements AuthorityGrantStore {
  constructor(private readonly ds: DataSource) {}

  private get repo() {
    return this.ds.getRepository(AuthorityGrantEntity);
  }

  async activate(g: AuthorityGrant): Promise<void> {
    await insertOrIgnore(this.ds, AuthorityGrantEntity, {
      grantId: g.grantId,
      grantee: g.grantee,
      action: g.action,
      limits: JSON.stringify(g.limits),
      expiresAt: g.expiresAt,
      proposer: g.proposer,
      approvedBy: g.approvedBy,
      grantedAt: g.grantedAt,
      revokedAt: null,
      revokeChangeId: null,
    });
  }

  async revoke(grantId: string, revokedAt: string, revokeChangeId: string): Promise<void> {
    await revokeOnce(this.ds, AuthorityGrantEntity, 'grant_id', grantId, { revokedAt, revokeChangeId });
  }

  async get(grantId: string): Promise<AuthorityGrant | undefined> {
    const row = await this.repo.findOneBy({ grantId });
    return row ? toGrant(row) : undefined;
  }

  async forGrantee(grantee: string, action: string): Promise<AuthorityGrant[]> {
    const rows = await this.repo
      .createQueryBuilder('g')
      .where('g.grantee = :grantee AND g.action = :action AND g.revoked_at IS NULL', { grantee, action })
      .orderBy('g.expiresAt', 'DESC')
      .addOrderBy('g.grantId', 'ASC')
      .getMany();
    return rows.map(toGrant);
  }

  async listInForce(now: string, page: number, pageSize: number): Promise<Page<AuthorityGrant>> {
    const [rows, total] = await this.repo
      .createQueryBuilder('g')
      .where('g.revoked_at IS NULL AND g.expires_at > :now', { now })
      .orderBy('g.grantee', 'ASC')
      .addOrderBy('g.action', 'ASC')
      .addOrderBy('g.grantedAt', 'ASC')
      .addOrderBy('g.grantId', 'ASC')
      .skip((page - 1) * pageSize)
      .take(pageSize)
      .getManyAndCount();
    return { items: rows.map(toGrant), page, pageSize, total };
  }
}

interface SingleUse {
  scope: string;
  id: string;
  at: string;
}

const CONSUME = 'INSERT INTO single_use_ids (scope, id, used_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING';
const CONSUME_BULK =
  'INSERT INTO single_use_ids (scope, id, used_at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING RETURNING scope, id';

/** Uses of single-use ids written by a group commit: on PostgreSQL one statement for a batch's uses. */
const consumeWrite = (pg: boolean): BulkWork<SingleUse, boolean> => ({
  key: 'single-use',
  rank: 'claim',
  async write(run, uses) {
    if (!pg) return oneByOne(uses, async (u) => ({ ok: true as const, value: (await run(CONSUME, [u.scope, u.id, u.at])).affected === 1 }));
    // The same id twice in one batch: the first use is the first, the second is not.
    const key = (u: SingleUse) => `${u.scope}\u0000${u.id}`;
    const first = new Map<string, SingleUse>();
    for (const u of uses) if (!first.has(key(u))) first.set(key(u), u);
    const rows = [...first.values()].sort((a, b) => (key(a) < key(b) ? -1 : 1));
    const inserted = new Set(
      ((await run(CONSUME_BULK, [rows.map((u) => u.scope), rows.map((u) => u.id), rows.map((u) => u.at)])).records as { scope: string; id: string }[]).map((r) =>
        key({ scope: r.scope, id: r.id, at: '' }),
      ),
    );
    return uses.map((u) => ({ ok: true as const, value: first.get(key(u)) === u && inserted.has(key(u)) }));
  },
});
const CONSUME_PG = consumeWrite(true);
const CONSUME_SQLITE = consumeWrite(false);

/**
 * Single-use ids in `single_use_ids`: an insert that does nothing on a conflict of the primary key,
 * so the rows it inserted say whether this use was the first, on both databases and across
 * processes (like the step-up nonces). Written in the store's group commit (a source's nonce, an
 * approval: each request of a batch has its own).
 */
export class TypeOrmSingleUseLedger implements SingleUseLedger {
  constructor(private readonly ds: DataSource) {}

  consume(scope: string, id: string, at: string): Promise<boolean> {
    return storeBulk(this.ds, this.ds.options.type === 'postgres' ? CONSUME_PG : CONSUME_SQLITE, { scope, id, at });
  }
}

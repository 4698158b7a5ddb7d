import type { DataSource, EntitySchema, ObjectLiteral } from 'typeorm';
import type { Page, Registration, RegistrationStore } from '@ets/domain';
import { insertOrIgnore, revokeOnce } from './serial-writes.js';

/** The columns every registration table has beside its own (see migrations 0009 and 0014). */
export interface RegistrationRow extends ObjectLiteral {
  registrationId: string;
  revokedAt: string | null;
  revokeChangeId: string | null;
}

/**
 * A registry table (external connectors, business signal sources): activating is one insert that
 * skips on any conflict (its own id already stored: a retried apply; or another active entry of the
 * key: the partial unique index on `<key> WHERE revoked_at IS NULL`), so of two racing approvals at
 * most one becomes active. Revoking sets `revoked_at` once.
 */
export class TypeOrmRegistrationStore<R extends Registration, Row extends RegistrationRow> implements RegistrationStore<R> {
  constructor(
    private readonly ds: DataSource,
    private readonly entity: EntitySchema<Row>,
    private readonly map: {
      /** The key's property and column (`capability`, `name`). */
      key: { property: keyof Row & string; column: string };
      toRow(r: R): Omit<Row, 'revokedAt' | 'revokeChangeId'>;
      toRegistration(row: Row): R;
    },
  ) {}

  private get repo() {
    return this.ds.getRepository(this.entity);
  }

  async activate(r: R): Promise<boolean> {
    await insertOrIgnore(this.ds, this.entity, { ...this.map.toRow(r), revokedAt: null, revokeChangeId: null } as never);
    return (await this.repo.countBy({ registrationId: r.registrationId } as never)) === 1;
  }

  async revoke(registrationId: string, revokedAt: string, revokeChangeId: string): Promise<void> {
    await revokeOnce(this.ds, this.entity, 'registration_id', registrationId, { revokedAt, revokeChangeId });
  }

  async active(key: string): Promise<R | undefined> {
    const row = await this.repo.createQueryBuilder('r').where(`r.${this.map.key.column} = :key AND r.revoked_at IS NULL`, { key }).getOne();
    return row ? this.map.toRegistration(row) : undefined;
  }

  async listActive(page: number, pageSize: number): Promise<Page<R>> {
    const [rows, total] = await this.repo
      .createQueryBuilder('r')
      .where('r.revoked_at IS NULL')
      .orderBy(`r.${this.map.key.property}`, 'ASC')
      .skip((page - 1) * pageSize)
      .take(pageSize)
      .getManyAndCount();
    return { items: rows.map((row) => this.map.toRegistration(row)), page, pageSize, total };
  }
}

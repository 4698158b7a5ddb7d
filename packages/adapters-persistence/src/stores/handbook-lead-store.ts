import type { DataSource } from 'typeorm';
import type { HandbookLeadStore } from '@ets/domain';
import { HandbookLeadEntity } from '../entities/handbook-lead.js';

/**
 * Handbook leads in `handbook_leads`, keyed by the lower-cased address. The insert ignores a
 * duplicate key atomically (SQLite and PostgreSQL: ON CONFLICT DO NOTHING), so concurrent adds of
 * one address in any casing store exactly one row and exactly one of them reports it as new. The
 * first casing seen is kept.
 */
export class TypeOrmHandbookLeadStore implements HandbookLeadStore {
  constructor(private readonly ds: DataSource) {}

  async add(email: string, at: Date): Promise<boolean> {
    const [sql, params] = this.ds
      .createQueryBuilder()
      .insert()
      .into(HandbookLeadEntity)
      .values({ emailKey: email.toLowerCase(), email, createdAt: at.toISOString() })
      .orIgnore()
      .getQueryAndParameters();
    // The structured result carries the affected row count on both drivers (InsertResult does not).
    const runner = this.ds.createQueryRunner();
    try {
      const result = await runner.query(sql, params, true);
      return result.affected === 1;
    } finally {
      await runner.release();
    }
  }
}

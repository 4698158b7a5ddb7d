import type { DataSource } from 'typeorm';
import type { Readiness, StorageHealth } from '@ets/domain';

/** Ready means: the database answers, and the table no release can happen without is there. */
export class TypeOrmStorageHealth implements StorageHealth {
  constructor(private readonly ds: DataSource) {}

  async readiness(): Promise<Readiness> {
    if (!this.ds.isInitialized) return { ready: false, reason: 'database connection is not open' };
    let runner;
    try {
      runner = this.ds.createQueryRunner();
      await runner.query('SELECT 1');
      if (!(await runner.hasTable('execution_intents'))) {
        return { ready: false, reason: 'table execution_intents is missing' };
      }
      return { ready: true };
    } catch {
      return { ready: false, reason: 'database is not answering' };
    } finally {
      await runner?.release().catch(() => undefined);
    }
  }
}

/** How many execution intents are in each state (the metrics' gauge, read at scrape time). */
export async function countIntentsByState(ds: DataSource): Promise<Record<string, number>> {
  const rows = (await ds.query('SELECT state, COUNT(*) AS n FROM execution_intents GROUP BY state')) as { state: string; n: number | string }[];
  return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
}

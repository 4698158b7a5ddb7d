import type { DataSource } from 'typeorm';
import { DomainError } from '@ets/domain';

export const STORAGE_UNAVAILABLE_MESSAGE = 'Storage is unavailable: no database connection could be had in time. Try again later.';

/**
 * A PostgreSQL connection that cannot be had (every pooled connection busy for longer than
 * `connectionTimeoutMillis`, or the server refusing or not answering) is the service being
 * unavailable, not a fault of the request: `503 STORAGE_UNAVAILABLE`, whatever store call of
 * whatever route ran into it. TypeORM obtains every connection (each query, each transaction)
 * through its driver's `obtainMasterConnection`, so the failure is given its domain meaning there,
 * once. While the DataSource is being initialized the driver's own error is kept, so that a start
 * against a database that cannot be reached says why. SQLite has no connection to wait for.
 */
export function reportUnobtainableConnections(ds: DataSource): DataSource {
  if (ds.options.type !== 'postgres') return ds;
  const driver = ds.driver as unknown as { obtainMasterConnection(): Promise<unknown> };
  const obtain = driver.obtainMasterConnection.bind(driver);
  driver.obtainMasterConnection = () =>
    obtain().catch((cause: unknown) => {
      if (!ds.isInitialized) throw cause;
      throw new DomainError('unavailable', STORAGE_UNAVAILABLE_MESSAGE, 'STORAGE_UNAVAILABLE', undefined, { cause });
    });
  return ds;
}

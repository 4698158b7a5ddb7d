import path from 'node:path';
import type { StorageTarget } from '@ets/adapters-persistence';
import type { Settings } from './config/settings.js';

/** PostgreSQL when SVC_DATABASE_URL is set, else the embedded SQLite file in the data dir. */
export function storageTargetFor(settings: Settings): StorageTarget {
  return settings.databaseUrl
    ? { kind: 'postgres', url: settings.databaseUrl }
    : { kind: 'sqlite', file: path.join(settings.dataDir, 'ets.sqlite') };
}

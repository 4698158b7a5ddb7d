import { EntitySchema } from 'typeorm';
import type { ConsoleSessionRow } from '@ets/domain';

/** Sessions of the approvers' console: a hash of the session id, never the id (ConsoleSessions). */
export const ConsoleSessionEntity = new EntitySchema<ConsoleSessionRow>({
  name: 'ConsoleSession',
  tableName: 'console_sessions',
  columns: {
    idHash: { name: 'id_hash', type: 'varchar', length: 64, primary: true },
    callerId: { name: 'caller_id', type: 'varchar', length: 256 },
    keyRef: { name: 'key_ref', type: 'varchar', length: 64 },
    createdAt: { name: 'created_at', type: 'varchar', length: 32 },
    expiresAt: { name: 'expires_at', type: 'varchar', length: 32 },
    endsAt: { name: 'ends_at', type: 'varchar', length: 32 },
  },
});

import type { PublishedKeyStore, PublishedSigningKey } from '@ets/domain';

/** A PublishedKeyStore in memory, with the same keep-the-first-record rule as the database one. */
export function memoryPublishedKeyStore(): PublishedKeyStore & { rows: PublishedSigningKey[] } {
  const rows: PublishedSigningKey[] = [];
  return {
    rows,
    async remember(keys) {
      for (const key of keys) if (!rows.some((r) => r.keyId === key.keyId)) rows.push({ ...key });
    },
    async list() {
      return rows.map((r) => ({ ...r }));
    },
  };
}

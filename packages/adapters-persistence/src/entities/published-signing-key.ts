import { EntitySchema } from 'typeorm';

export interface PublishedSigningKeyRow {
  keyId: string;
  alg: string;
  publicKey: string;
  provider: string;
  publishedAt: string;
}

export const PublishedSigningKeyEntity = new EntitySchema<PublishedSigningKeyRow>({
  name: 'PublishedSigningKey',
  tableName: 'published_signing_keys',
  columns: {
    keyId: { name: 'key_id', type: 'varchar', length: 128, primary: true },
    alg: { name: 'alg', type: 'varchar', length: 16 },
    // ML-DSA-65 public keys are 1952 bytes (2603 base64url characters).
    publicKey: { name: 'public_key', type: 'text' },
    provider: { name: 'provider', type: 'varchar', length: 16 },
    publishedAt: { name: 'published_at', type: 'varchar', length: 32 },
  },
});

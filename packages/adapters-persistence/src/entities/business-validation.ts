import { EntitySchema } from 'typeorm';

export interface SignalSourceRow {
  registrationId: string;
  name: string;
  endpoint: string;
  publicKey: string | null;
  keyId: string | null;
  proposer: string;
  approvedBy: string;
  registeredAt: string;
  revokedAt: string | null;
  revokeChangeId: string | null;
}

export const SignalSourceEntity = new EntitySchema<SignalSourceRow>({
  name: 'BusinessSignalSource',
  tableName: 'business_signal_sources',
  columns: {
    registrationId: { name: 'registration_id', type: 'varchar', length: 64, primary: true },
    name: { name: 'name', type: 'varchar', length: 64 },
    endpoint: { name: 'endpoint', type: 'varchar', length: 2048 },
    publicKey: { name: 'public_key', type: 'text', nullable: true },
    keyId: { name: 'key_id', type: 'varchar', length: 128, nullable: true },
    proposer: { name: 'proposer', type: 'varchar', length: 256 },
    approvedBy: { name: 'approved_by', type: 'varchar', length: 256 },
    registeredAt: { name: 'registered_at', type: 'varchar', length: 32 },
    revokedAt: { name: 'revoked_at', type: 'varchar', length: 32, nullable: true },
    revokeChangeId: { name: 'revoke_change_id', type: 'varchar', length: 64, nullable: true },
  },
});

export interface AuthorityGrantRow {
  grantId: string;
  grantee: string;
  action: string;
  limits: string;
  expiresAt: string;
  proposer: string;
  approvedBy: string;
  grantedAt: string;
  revokedAt: string | null;
  revokeChangeId: string | null;
}

export const AuthorityGrantEntity = new EntitySchema<AuthorityGrantRow>({
  name: 'AuthorityGrant',
  tableName: 'authority_grants',
  columns: {
    grantId: { name: 'grant_id', type: 'varchar', length: 64, primary: true },
    grantee: { name: 'grantee', type: 'varchar', length: 256 },
    action: { name: 'action', type: 'varchar', length: 128 },
    limits: { name: 'limits', type: 'text' },
    expiresAt: { name: 'expires_at', type: 'varchar', length: 32 },
    proposer: { name: 'proposer', type: 'varchar', length: 256 },
    approvedBy: { name: 'approved_by', type: 'varchar', length: 256 },
    grantedAt: { name: 'granted_at', type: 'varchar', length: 32 },
    revokedAt: { name: 'revoked_at', type: 'varchar', length: 32, nullable: true },
    revokeChangeId: { name: 'revoke_change_id', type: 'varchar', length: 64, nullable: true },
  },
});

export interface SingleUseIdRow {
  scope: string;
  id: string;
  usedAt: string;
}

export const SingleUseIdEntity = new EntitySchema<SingleUseIdRow>({
  name: 'SingleUseId',
  tableName: 'single_use_ids',
  columns: {
    scope: { name: 'scope', type: 'varchar', length: 32, primary: true },
    id: { name: 'id', type: 'varchar', length: 512, primary: true },
    usedAt: { name: 'used_at', type: 'varchar', length: 32 },
  },
});

import { EntitySchema } from 'typeorm';

export interface ExternalConnectorRow {
  registrationId: string;
  capability: string;
  endpoint: string;
  policyName: string;
  forwardedParameters: string;
  timeoutMs: number;
  proposer: string;
  approvedBy: string;
  registeredAt: string;
  revokedAt: string | null;
  revokeChangeId: string | null;
}

export const ExternalConnectorEntity = new EntitySchema<ExternalConnectorRow>({
  name: 'ExternalConnector',
  tableName: 'external_connectors',
  columns: {
    registrationId: { name: 'registration_id', type: 'varchar', length: 64, primary: true },
    capability: { name: 'capability', type: 'varchar', length: 128 },
    endpoint: { name: 'endpoint', type: 'varchar', length: 2048 },
    policyName: { name: 'policy_name', type: 'varchar', length: 128 },
    forwardedParameters: { name: 'forwarded_parameters', type: 'text' },
    timeoutMs: { name: 'timeout_ms', type: 'integer' },
    proposer: { name: 'proposer', type: 'varchar', length: 256 },
    approvedBy: { name: 'approved_by', type: 'varchar', length: 256 },
    registeredAt: { name: 'registered_at', type: 'varchar', length: 32 },
    revokedAt: { name: 'revoked_at', type: 'varchar', length: 32, nullable: true },
    revokeChangeId: { name: 'revoke_change_id', type: 'varchar', length: 64, nullable: true },
  },
});

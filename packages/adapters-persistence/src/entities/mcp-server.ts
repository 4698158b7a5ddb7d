import { EntitySchema } from 'typeorm';

export interface McpServerRow {
  registrationId: string;
  name: string;
  url: string | null;
  stdio: string | null;
  policyName: string;
  /** JSON array of tool names, or `["*"]`. */
  tools: string;
  timeoutMs: number;
  proposer: string;
  approvedBy: string;
  registeredAt: string;
  revokedAt: string | null;
  revokeChangeId: string | null;
}

export const McpServerEntity = new EntitySchema<McpServerRow>({
  name: 'McpServer',
  tableName: 'mcp_servers',
  columns: {
    registrationId: { name: 'registration_id', type: 'varchar', length: 64, primary: true },
    name: { name: 'name', type: 'varchar', length: 64 },
    url: { name: 'url', type: 'varchar', length: 2048, nullable: true },
    stdio: { name: 'stdio', type: 'varchar', length: 64, nullable: true },
    policyName: { name: 'policy_name', type: 'varchar', length: 128 },
    tools: { name: 'tools', type: 'text' },
    timeoutMs: { name: 'timeout_ms', type: 'integer' },
    proposer: { name: 'proposer', type: 'varchar', length: 256 },
    approvedBy: { name: 'approved_by', type: 'varchar', length: 256 },
    registeredAt: { name: 'registered_at', type: 'varchar', length: 32 },
    revokedAt: { name: 'revoked_at', type: 'varchar', length: 32, nullable: true },
    revokeChangeId: { name: 'revoke_change_id', type: 'varchar', length: 64, nullable: true },
  },
});

import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Upstream MCP servers (CONTRACT "MCP gateway"), registered like external connectors: a row is
 * inserted when a register change is approved (`registration_id` = that change's id) and ended,
 * never deleted, when a revoke change is approved. Exactly one of `url` (https) and `stdio` (a name
 * of the operator's SVC_MCP_STDIO_SERVERS file) is set. The partial unique index keeps at most one
 * active server per name, whoever races, on both databases.
 */
export class McpServers1763685300000 implements MigrationInterface {
  name = 'McpServers1763685300000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'mcp_servers',
        columns: [
          { name: 'registration_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'name', type: 'varchar', length: '64' },
          { name: 'url', type: 'varchar', length: '2048', isNullable: true },
          { name: 'stdio', type: 'varchar', length: '64', isNullable: true },
          { name: 'policy_name', type: 'varchar', length: '128' },
          // JSON array of tool names, or ["*"].
          { name: 'tools', type: 'text' },
          { name: 'timeout_ms', type: 'integer' },
          { name: 'proposer', type: 'varchar', length: '256' },
          { name: 'approved_by', type: 'varchar', length: '256' },
          { name: 'registered_at', type: 'varchar', length: '32' },
          { name: 'revoked_at', type: 'varchar', length: '32', isNullable: true },
          { name: 'revoke_change_id', type: 'varchar', length: '64', isNullable: true },
        ],
      }),
    );
    await q.createIndex('mcp_servers', new TableIndex({ name: 'uq_mcp_servers_active_name', columnNames: ['name'], isUnique: true, where: 'revoked_at IS NULL' }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('mcp_servers');
  }
}

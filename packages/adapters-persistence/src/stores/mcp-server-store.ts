import type { DataSource } from 'typeorm';
import type { McpServerRegistration, McpServerStore } from '@ets/domain';
import { McpServerEntity, type McpServerRow } from '../entities/mcp-server.js';
import { TypeOrmRegistrationStore } from './registration-table.js';

/** Upstream MCP servers in `mcp_servers`, at most one active per name. */
export class TypeOrmMcpServerStore extends TypeOrmRegistrationStore<McpServerRegistration, McpServerRow> implements McpServerStore {
  constructor(ds: DataSource) {
    super(ds, McpServerEntity, {
      key: { property: 'name', column: 'name' },
      toRow: (r) => ({
        registrationId: r.registrationId,
        name: r.name,
        url: r.url,
        stdio: r.stdio,
        policyName: r.policyName,
        tools: JSON.stringify(r.tools),
        timeoutMs: r.timeoutMs,
        proposer: r.proposer,
        approvedBy: r.approvedBy,
        registeredAt: r.registeredAt,
      }),
      toRegistration: (r) => ({
        registrationId: r.registrationId,
        name: r.name,
        url: r.url ?? null,
        stdio: r.stdio ?? null,
        policyName: r.policyName,
        tools: JSON.parse(r.tools) as string[],
        timeoutMs: Number(r.timeoutMs),
        proposer: r.proposer,
        approvedBy: r.approvedBy,
        registeredAt: r.registeredAt,
      }),
    });
  }
}

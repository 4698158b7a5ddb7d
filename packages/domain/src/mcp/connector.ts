/**
 * The release of an MCP tool call: the pipeline's connector for the actions `mcp-<server>:<verb>`.
 * It releases to the upstream server through the McpUpstreams port and reads what came back as
 * the pipeline's connector phases: nothing sent → `before-send`; a timeout, a crash or anything
 * else after sending → `outcome-unknown` (never retried); an answer → the executed call, its
 * `CallToolResult` the recorded result (an upstream `isError: true` result too: the upstream ran
 * the call and said how it went).
 */
import type { Clock } from '../ports/clock.js';
import { ConnectorError, type Connector, type ReleaseRequest } from '../execution/connectors.js';
import type { ConnectorKind } from '../execution/connector-chain.js';
import type { InputSchemas } from './input-schema.js';
import { isMcpNamespace, MCP_NAMESPACE_PREFIX, mcpNamespace, serverOfAction } from './names.js';
import type { McpServerStore, McpUpstreams } from './ports.js';
import type { McpServerRegistration } from './registration.js';
import { stillActive } from '../governance/registrations.js';
import type { McpToolCatalog } from './tool-catalog.js';

export interface McpReleaseDeps {
  servers: Pick<McpServerStore, 'active'>;
  catalog: Pick<McpToolCatalog, 'byAction'>;
  upstreams: Pick<McpUpstreams, 'callTool'>;
  schemas: Pick<InputSchemas, 'check'>;
  clock: Clock;
}

/** The connector of one active MCP server. */
export class McpConnector implements Connector {
  readonly namespace: string;
  readonly policyName: string;

  constructor(
    private readonly registration: McpServerRegistration,
    private readonly deps: McpReleaseDeps,
  ) {
    this.namespace = mcpNamespace(registration.name);
    this.policyName = registration.policyName;
  }

  async release(request: ReleaseRequest): Promise<{ result: unknown }> {
    const { deps } = this;
    // It may have been revoked since the request was decided: then nothing may be sent.
    const current = await stillActive(deps.servers, this.registration.name, this.registration.registrationId, `the MCP server '${this.registration.name}'`);
    const now = deps.clock.now().getTime();
    for (const c of request.conditions) {
      if (!(Date.parse(c.validUntil) > now)) throw new ConnectorError('conditions-not-met', `The fact '${c.signal}' held only until ${c.validUntil}.`);
    }
    // The tool the action names now, with the checks of the gateway's `tools/call` again: the same
    // action may come through `POST /execute`, which knows nothing of the tool's schema.
    const tool = await deps.catalog.byAction(current, request.action);
    if (!tool) throw new ConnectorError('before-send', `The MCP server '${current.name}' offers no tool for '${request.action}' now; nothing was sent.`);
    const problems = deps.schemas.check(tool.inputSchema, request.parameters);
    if (problems) throw new ConnectorError('before-send', `The parameters do not match the input schema of '${tool.gatewayName}' (${problems.join('; ')}); nothing was sent.`);
    const answer = await deps.upstreams.callTool(current, { tool: tool.name, arguments: request.parameters, timeoutMs: current.timeoutMs });
    if (answer.outcome === 'not-sent') throw new ConnectorError('before-send', `Nothing was sent to the MCP server '${current.name}': ${answer.message}.`);
    if (answer.outcome === 'unknown') {
      throw new ConnectorError('outcome-unknown', `The call was sent to the MCP server '${current.name}'; its outcome is unknown (${answer.reason}): ${answer.message}.`);
    }
    return { result: answer.result };
  }
}

/**
 * The pipeline's connectors for `mcp-<server>:…` actions: the server's active registration. A kind
 * of connector of its own in the chain: it owns every `mcp-` namespace, so no other kind (an external
 * HTTPS registration made before the prefix was reserved included) is ever released to there.
 */
export class McpConnectorRegistry implements ConnectorKind {
  readonly owner = `MCP servers (${MCP_NAMESPACE_PREFIX}*: POST /mcp-servers/changes)`;

  constructor(private readonly deps: McpReleaseDeps) {}

  owns(namespace: string): boolean {
    return isMcpNamespace(namespace);
  }

  async find(action: string): Promise<Connector | undefined> {
    const server = serverOfAction(action);
    if (server === undefined) return undefined;
    const registration = await this.deps.servers.active(server);
    return registration && new McpConnector(registration, this.deps);
  }
}

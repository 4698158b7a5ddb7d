/**
 * Upstream MCP servers through maker-checker (CONTRACT "MCP gateway"), like external connectors: a
 * human proposes registering a server (an https `url`, or a `stdio` server the operator named) or
 * revoking it; a different human approves with a step-up envelope, and the change takes effect at
 * once. At most one server per name is active, and at most one change per name is pending.
 */
import { readReason, requireProposer, type GovernedKindDeps } from '../governance/maker-checker.js';
import { RegistryGovernance } from '../governance/governed-registry.js';
import { activeForProposal, RegistryApplier } from '../governance/registrations.js';
import type { Caller } from '../identity/caller.js';
import type { Egress } from '../egress/ports.js';
import { requireResolvingEndpoint } from '../egress/endpoint.js';
import type { McpServerStore } from './ports.js';
import {
  describeMcpServerChange,
  MCP_SERVER_CHANGE_KIND,
  mcpServerRegistrationOf,
  readMcpServerProposal,
  toMcpServerChangeView,
  type McpServerChangePayload,
  type McpServerChangeView,
  type McpServerRegistration,
} from './registration.js';

export interface McpServerGovernanceDeps extends GovernedKindDeps {
  servers: McpServerStore;
  egress: Pick<Egress, 'check'>;
  /** The names of the operator's SVC_MCP_STDIO_SERVERS file. */
  stdioServers: readonly string[];
}

export class McpServerGovernance extends RegistryGovernance<McpServerChangePayload, McpServerChangeView, McpServerRegistration> {
  constructor(private readonly deps: McpServerGovernanceDeps) {
    super(
      deps,
      {
        kind: MCP_SERVER_CHANGE_KIND,
        applier: new RegistryApplier(deps.servers, mcpServerRegistrationOf, (c) => `MCP server '${c.payload.name}'`),
        describe: describeMcpServerChange,
        toView: toMcpServerChangeView,
      },
      deps.servers,
    );
  }

  async propose(caller: Caller, body: unknown): Promise<McpServerChangeView> {
    requireProposer(caller);
    const input = readMcpServerProposal(body, this.deps.stdioServers);
    const reason = readReason((body as Record<string, unknown>).reason);
    const name = input.kind === 'register' ? input.payload.name : input.name;
    // The egress rules of an external connector's endpoint, on the server's URL (the `url` field).
    if (input.kind === 'register' && input.payload.url !== null) await requireResolvingEndpoint(this.deps.egress, input.payload.url, 'url');
    const active = await activeForProposal(this.deps.servers, name, input.kind, `MCP server '${name}'`);
    const payload: McpServerChangePayload =
      input.kind === 'register' ? { kind: 'register', ...input.payload } : { kind: 'revoke', name, registrationId: active!.registrationId };
    return this.proposeChange(caller, { payload, subject: name, reason });
  }
}

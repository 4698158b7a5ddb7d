/**
 * Upstream MCP servers and their changes (CONTRACT "MCP gateway"): what a proposal may say, each
 * rule broken answered 400 naming the field. A server is reached either at an https `url` (every
 * egress rule of an external connector) or as a `stdio` server the operator named in
 * SVC_MCP_STDIO_SERVERS: a proposal names the server, never a command.
 */
import type { PendingChange } from '../governance/change.js';
import { changeViewBase, changeViewDecision, readProposalFields, type RegistryChangeView } from '../governance/governed-registry.js';
import { readEndpoint } from '../egress/endpoint.js';
import { readConnectorTimeout, readPolicyName } from '../external-connectors/registration.js';
import { invalid } from '../shared/errors.js';
import { MCP_TOOL_NAME, serverNameProblem } from './names.js';

export const MCP_SERVER_CHANGE_KIND = 'mcp-server';
/** `tools: ["*"]`: every tool the server offers. */
export const ALL_TOOLS = '*';
export const MCP_TOOLS_LIST_MAX = 500;

/** An active upstream server; `registrationId` is the approved register change's id. Exactly one of `url` and `stdio` is set. */
export interface McpServerRegistration {
  registrationId: string;
  name: string;
  url: string | null;
  stdio: string | null;
  policyName: string;
  /** `["*"]`, or the names of the tools the gateway offers. */
  tools: string[];
  timeoutMs: number;
  proposer: string;
  approvedBy: string;
  registeredAt: string;
}

export type McpServerRegisterPayload = {
  kind: 'register';
  name: string;
  url: string | null;
  stdio: string | null;
  policyName: string;
  tools: string[];
  timeoutMs: number;
};
/** A revoke names the registration that was active when it was proposed; that is what it ends. */
export type McpServerRevokePayload = { kind: 'revoke'; name: string; registrationId: string };
export type McpServerChangePayload = McpServerRegisterPayload | McpServerRevokePayload;

/** The change as the API shows it (bare object). */
export interface McpServerChangeView extends RegistryChangeView {
  name: string;
  url?: string | null;
  stdio?: string | null;
  policyName?: string;
  tools?: string[];
  timeoutMs?: number;
}

export function toMcpServerChangeView(c: PendingChange<McpServerChangePayload>): McpServerChangeView {
  const p = c.payload;
  return {
    ...changeViewBase(c),
    name: p.name,
    ...(p.kind === 'register'
      ? { url: p.url, stdio: p.stdio, policyName: p.policyName, tools: p.tools, timeoutMs: p.timeoutMs }
      : { registrationId: p.registrationId }),
    ...changeViewDecision(c),
  };
}

const where = (p: McpServerRegisterPayload): string => (p.url !== null ? `at ${p.url}` : `as the stdio server '${p.stdio}'`);

export const describeMcpServerChange = (c: PendingChange<McpServerChangePayload>): string =>
  c.payload.kind === 'register'
    ? `register MCP server '${c.payload.name}' ${where(c.payload)} (policy '${c.payload.policyName}', tools [${c.payload.tools.join(', ')}], timeout ${c.payload.timeoutMs} ms)`
    : `revoke MCP server '${c.payload.name}' (registration ${c.payload.registrationId})`;

export const mcpServerRegistrationOf = (change: PendingChange<McpServerChangePayload>): McpServerRegistration => {
  const p = change.payload as McpServerRegisterPayload;
  return {
    registrationId: change.id,
    name: p.name,
    url: p.url,
    stdio: p.stdio,
    policyName: p.policyName,
    tools: p.tools,
    timeoutMs: p.timeoutMs,
    proposer: change.proposer,
    approvedBy: change.decider!,
    registeredAt: change.decidedAt!,
  };
};

const FIELDS = {
  register: ['kind', 'name', 'url', 'stdio', 'policyName', 'tools', 'timeoutMs', 'reason'],
  revoke: ['kind', 'name', 'reason'],
} as const;

export type McpServerProposalInput = { kind: 'register'; payload: Omit<McpServerRegisterPayload, 'kind'> } | { kind: 'revoke'; name: string };

/**
 * The rules a proposal must keep that need no lookup. `stdioServers`: the names the operator's
 * SVC_MCP_STDIO_SERVERS file holds. `reason` is read by maker-checker; where a `url` resolves is
 * checked by the caller.
 */
export function readMcpServerProposal(input: unknown, stdioServers: readonly string[]): McpServerProposalInput {
  const { kind, body } = readProposalFields(input, FIELDS, '{"kind": "register" | "revoke", "name": "…", …}');
  const nameProblem = serverNameProblem(body.name);
  if (nameProblem) throw invalid(`name ${nameProblem}`);
  const name = body.name as string;
  if (kind === 'revoke') return { kind, name };
  const { url, stdio } = readLocation(body.url, body.stdio, stdioServers);
  return {
    kind,
    payload: { name, url, stdio, policyName: readPolicyName(body.policyName), tools: readTools(body.tools), timeoutMs: readConnectorTimeout(body.timeoutMs) },
  };
}

function readLocation(url: unknown, stdio: unknown, stdioServers: readonly string[]): { url: string | null; stdio: string | null } {
  const hasUrl = url !== undefined && url !== null;
  const hasStdio = stdio !== undefined && stdio !== null;
  if (hasUrl === hasStdio) throw invalid('url or stdio is required, not both: an https URL, or the name of a server in the operator\'s SVC_MCP_STDIO_SERVERS file.');
  if (hasUrl) {
    const endpoint = readEndpoint(url);
    if (!endpoint.ok) throw invalid(`url ${endpoint.problem}`);
    return { url: endpoint.endpoint.url, stdio: null };
  }
  if (typeof stdio !== 'string' || !stdioServers.includes(stdio)) {
    const known = stdioServers.length === 0 ? 'the operator has named none (SVC_MCP_STDIO_SERVERS)' : `known: ${stdioServers.join(', ')}`;
    throw invalid(`stdio must name a server of the operator's SVC_MCP_STDIO_SERVERS file (${known}); a proposal never carries a command.`);
  }
  return { url: null, stdio };
}

function readTools(value: unknown): string[] {
  const shape = `tools is required: ["${ALL_TOOLS}"] for every tool of the server, or a list of its tool names`;
  if (!Array.isArray(value) || value.length === 0) throw invalid(`${shape}.`);
  if (value.length > MCP_TOOLS_LIST_MAX) throw invalid(`tools must name at most ${MCP_TOOLS_LIST_MAX} tools.`);
  if (value.includes(ALL_TOOLS)) {
    if (value.length > 1) throw invalid(`tools must be ["${ALL_TOOLS}"] alone, or a list of tool names without "${ALL_TOOLS}".`);
    return [ALL_TOOLS];
  }
  const seen = new Set<string>();
  value.forEach((name, i) => {
    if (typeof name !== 'string' || !MCP_TOOL_NAME.test(name)) throw invalid(`tools[${i}] must be a tool name: 1 to 128 ASCII letters, digits, '_', '-' or '.' (${MCP_TOOL_NAME.source}).`);
    if (seen.has(name)) throw invalid(`tools[${i}] repeats '${name}'.`);
    seen.add(name);
  });
  return value as string[];
}

/** Whether the registration lets the gateway offer this tool. */
export const registrationAllows = (r: Pick<McpServerRegistration, 'tools'>, tool: string): boolean => r.tools.includes(ALL_TOOLS) || r.tools.includes(tool);

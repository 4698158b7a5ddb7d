/**
 * The names of the MCP gateway: an upstream server's name, the gateway's
 * tool name `<server>__<tool>`, and the action (capability) a call is decided as,
 * `mcp-<server>:<tool lower-cased, every character outside [a-z0-9] turned into ->`.
 */
import { isCapability, isName, MCP_SERVER_NAME_PATTERN } from '../shared/names.js';

/**
 * Every capability of an MCP server is in the namespace `mcp-<server>`; external connectors may
 * never register one in it (the whole prefix is reserved, not only the servers registered now).
 */
export const MCP_NAMESPACE_PREFIX = 'mcp-';

/** Between the server's name and the tool's in the gateway's tool name. */
export const TOOL_NAME_SEPARATOR = '__';

/**
 * An upstream tool's name as MCP says it should be (2025-11-25 "Tool names": 1 to 128 ASCII
 * letters, digits, `_`, `-`, `.`). A tool named otherwise is not offered.
 */
export const MCP_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

export const mcpNamespace = (server: string): string => `${MCP_NAMESPACE_PREFIX}${server}`;

export const isMcpNamespace = (namespace: string): boolean => namespace.startsWith(MCP_NAMESPACE_PREFIX);

/**
 * A server name the gateway can use: the contract's pattern, and `mcp-<name>` a namespace of a
 * capability (spec 2.5), which a doubled or trailing hyphen would break (`a--b`, `a-`): every tool
 * of such a server would be unreachable. `problem` completes "name …".
 */
export function serverNameProblem(name: unknown): string | undefined {
  if (!isName('mcpServerName', name)) {
    return `is required: 1 to 40 lowercase letters, digits or hyphens, starting with a letter (${MCP_SERVER_NAME_PATTERN}).`;
  }
  if (!isCapability(`${mcpNamespace(name)}:x`)) return `must not end with a hyphen or hold two hyphens in a row: '${mcpNamespace(name)}' must be a capability namespace.`;
  return undefined;
}

/** The contract's action of a tool, whether or not it is a valid capability. */
export const toolAction = (server: string, tool: string): string => `${mcpNamespace(server)}:${tool.toLowerCase().replace(/[^a-z0-9]/g, '-')}`;

/**
 * The capability a tool is decided as, or undefined when the contract's mapping does not give a
 * valid capability (spec 2.5: a verb starting with a digit, two hyphens in a row, longer than 128
 * characters): such a tool is never offered, since no key could be allowed it and no policy
 * could decide it.
 */
export function toolCapability(server: string, tool: string): string | undefined {
  const action = toolAction(server, tool);
  return isCapability(action) ? action : undefined;
}

export const gatewayToolName = (server: string, tool: string): string => `${server}${TOOL_NAME_SEPARATOR}${tool}`;

/**
 * The server and tool of a gateway tool name. A server name holds no `_`, so the first `__` is the
 * separator (the tool's own name may hold more).
 */
export function splitGatewayToolName(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf(TOOL_NAME_SEPARATOR);
  if (at <= 0) return undefined;
  const server = name.slice(0, at);
  const tool = name.slice(at + TOOL_NAME_SEPARATOR.length);
  return isName('mcpServerName', server) && tool !== '' ? { server, tool } : undefined;
}

/** The server an action names, when it is in the MCP namespace (`mcp-<server>:…`). */
export function serverOfAction(action: string): string | undefined {
  const colon = action.indexOf(':');
  const namespace = colon < 0 ? action : action.slice(0, colon);
  return isMcpNamespace(namespace) ? namespace.slice(MCP_NAMESPACE_PREFIX.length) : undefined;
}

import type { RegistrationStore } from '../governance/registrations.js';
import type { McpServerRegistration } from './registration.js';

/** Active upstream MCP servers: at most one per name (the key of `active`). */
export interface McpServerStore extends RegistrationStore<McpServerRegistration> {}

/** A tool as an upstream lists it (`tools/list`), in the shape the protocol gives it. */
export interface UpstreamTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/** A server's tools, or why it has none now (it is asked again later). */
export type UpstreamToolListing = { ok: true; tools: readonly UpstreamTool[] } | { ok: false; message: string };

/** A `CallToolResult` as the upstream answered it (`content`, `structuredContent`, `isError`, `_meta`, …). */
export type CallToolResult = Record<string, unknown> & { isError?: boolean };

/**
 * What became of a `tools/call` sent upstream, as data (like EgressResult):
 * - `answered`: the upstream answered with a result, `isError: true` included (an executed call
 *   whose result is recorded);
 * - `not-sent`: nothing reached the upstream (no session could be made, an egress rule refused it);
 * - `unknown`: it was (or may have been) sent and no result came back: a timeout, the upstream
 *   crashed or closed the connection, or answered with an error of the protocol. Never retried.
 */
export type UpstreamCallOutcome =
  | { outcome: 'answered'; result: CallToolResult }
  | { outcome: 'not-sent'; message: string }
  | { outcome: 'unknown'; reason: 'timeout' | 'closed' | 'error'; message: string };

/** The upstream MCP servers, reached through the official SDK's client (an adapter). */
export interface McpUpstreams {
  /**
   * The server's tools: kept per server and asked again when the upstream says its list changed.
   * Never throws and never waits longer than the server's timeout; a server that fails is asked
   * again later, and meanwhile has no tools.
   */
  listTools(server: McpServerRegistration): Promise<UpstreamToolListing>;
  /** Calls a tool once, within `timeoutMs`. Never throws; never retried. */
  callTool(server: McpServerRegistration, call: { tool: string; arguments: Record<string, unknown>; timeoutMs: number }): Promise<UpstreamCallOutcome>;
  /** The servers in force now: sessions (and processes) of any other are closed. */
  retain(active: readonly McpServerRegistration[]): void;
}

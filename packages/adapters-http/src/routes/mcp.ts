import type { NextFunction, Request, Response } from 'express';
import type { GovernedRegistry } from '@ets/domain';
import { callerOf } from '../middleware/authenticate.js';
import { answerMcpPost, type GatewayServerDeps } from '../mcp/gateway-server.js';
import type { RouteModule } from '../route-table.js';
import { governedRegistryRoutes } from './external-connectors.js';

export interface McpRoutesDeps {
  /** `/mcp-servers/changes…`, `GET /mcp-servers`. */
  governance: GovernedRegistry<unknown, unknown>;
  gateway: GatewayServerDeps;
  /** SVC_MCP_ALLOWED_ORIGINS: the browser origins that may call `/mcp` (default none). */
  allowedOrigins: readonly string[];
}

/** A JSON-RPC error without a request id, as the MCP transport answers what it refuses. */
function jsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.status(status).set(headers).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/**
 * MCP Streamable HTTP, security warning 1: the Origin header is checked on every request against
 * DNS rebinding (a page of another site that resolves its name to this service). A request
 * without one (every non-browser client) passes; one with an origin not listed is 403.
 */
const checkOrigin =
  (allowed: readonly string[]) =>
  (req: Request, res: Response, next: NextFunction): void => {
    const origin = req.headers.origin;
    if (origin === undefined || allowed.includes(origin.toLowerCase())) return next();
    jsonRpcError(res, 403, -32000, 'Forbidden: this Origin may not call the MCP endpoint (SVC_MCP_ALLOWED_ORIGINS).');
  };

/** How many `tools/call` a message holds: each counts against the caller's execute limit. */
const toolCalls = (body: unknown): number =>
  (Array.isArray(body) ? body : [body]).filter((m) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'tools/call').length;

/**
 * The MCP gateway (CONTRACT "MCP gateway"): `/mcp`, the Model Context Protocol over Streamable
 * HTTP, stateless (gateway-server.ts), and the upstream servers' governed registry. `/mcp` passes
 * every layer of a keyed route: the bearer key (401 before any MCP), the failed-authentication
 * limit, the authentication's audit, the body reader (strict JSON, the body limit: the error
 * envelope); each `tools/call` counts against the caller's execute limit. Then the SDK's transport
 * answers: 406 without an Accept of both JSON and SSE, 400 for a message that is not JSON-RPC or
 * an unsupported MCP-Protocol-Version, a JSON response or an SSE stream otherwise. GET (no
 * stream is offered without a session) and DELETE (there is no session to end) are 405 with
 * `Allow: POST`, as every method a mounted path does not take (app.ts).
 */
export const mcpRoutes = (deps: McpRoutesDeps): RouteModule => (t) => {
  governedRegistryRoutes('/mcp-servers', deps.governance)(t);
  const origins = deps.allowedOrigins.map((o) => o.toLowerCase());
  const beforeBody = checkOrigin(origins);

  t.post('/mcp', { auth: 'key', limiter: 'execute', limitedBody: toolCalls, beforeBody }, async (req, res) => {
    // An empty body reaches here as undefined (the body reader's "no body"): not a JSON-RPC message.
    if (req.body === undefined) return jsonRpcError(res, 400, -32700, 'Parse error: the body must be one JSON-RPC message.');
    // JSON-RPC 2.0: an empty batch is an invalid request (the SDK would accept it as nothing to do).
    if (Array.isArray(req.body) && req.body.length === 0) return jsonRpcError(res, 400, -32600, 'Invalid Request: an empty batch.');
    await answerMcpPost(deps.gateway, callerOf(res), req, res);
  });
};

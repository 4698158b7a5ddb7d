/**
 * The gateway as an MCP server, built on the official SDK (`Server`, the low-level one: the tools
 * are the upstreams', known only per request) over the SDK's Streamable HTTP server transport.
 *
 * Stateless: each `POST /mcp` gets its own server and transport, no session id is issued and
 * nothing of a session is kept between requests, so any instance behind a load balancer answers
 * any request (several instances share one PostgreSQL; no sticky sessions). What a response needs
 * (progress notifications, later) travels on the SSE stream of its own POST.
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { Caller, HeldTransaction, Logger, McpToolCalls } from '@ets/domain';

export interface GatewayServerDeps {
  calls: Pick<McpToolCalls, 'list' | 'call'>;
  logger: Logger;
  /** How the gateway names itself in `initialize`. */
  serverInfo: { name: string; version: string };
}

const INSTRUCTIONS =
  'Every tool call is decided by the policy of its server and recorded as signed evidence before it is released. ' +
  'A result carries _meta["ets/trustRecord"] (executed), _meta["ets/refusal"] (refused by policy), _meta["ets/override"] (held for a human) or _meta["ets/error"].';

/** Answers one `POST /mcp` (a JSON-RPC message already read and checked as strict JSON) for `caller`. */
export async function answerMcpPost(deps: GatewayServerDeps, caller: Caller, req: Request, res: Response): Promise<void> {
  const server = gatewayServer(deps, caller, recordUrlOf(req));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close().catch(() => undefined);
    void server.close().catch(() => undefined);
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
}

function gatewayServer(deps: GatewayServerDeps, caller: Caller, recordUrl: (id: string) => string): Server {
  const server = new Server(deps.serverInfo, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
  // What is not the caller's to fix is a JSON-RPC internal error that says nothing of why; the log has it.
  const guarded =
    <A extends unknown[], R>(what: string, handler: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      try {
        return await handler(...a);
      } catch (e) {
        if (e instanceof McpError) throw e;
        const correlationId = randomUUID();
        deps.logger.error({ correlationId, method: what, err: e instanceof Error ? { name: e.name, message: e.message, stack: e.stack } : String(e) }, 'MCP gateway: unhandled failure');
        throw new McpError(ErrorCode.InternalError, 'Internal error');
      }
    };
  server.setRequestHandler(
    ListToolsRequestSchema,
    guarded('tools/list', async () => ({ tools: await deps.calls.list(caller) })),
  );
  server.setRequestHandler(
    CallToolRequestSchema,
    guarded('tools/call', async (request, extra) => {
      const answer = await deps.calls.call(caller, { name: request.params.name, arguments: request.params.arguments }, recordUrl, {
        signal: extra.signal,
        onWaiting: progressOf(request.params._meta?.progressToken, extra),
      });
      // MCP: an unknown tool is a protocol error (-32602); a tool the key may not call is unknown to it.
      if (answer.kind === 'unknown-tool') throw new McpError(ErrorCode.InvalidParams, answer.message);
      return answer.result as never;
    }),
  );
  return server;
}

/** How often a held call tells a client that asked for progress that it still waits. */
const PROGRESS_EVERY_MS = 2000;

/**
 * Progress notifications for a call held for a human, when the client asked for them (a
 * `progressToken`): at most one every PROGRESS_EVERY_MS, `progress` the seconds waited (it only
 * grows), `total` the seconds it may wait, on the SSE stream of the call's own POST.
 */
function progressOf(token: string | number | undefined, extra: { sendNotification(n: ServerNotification): Promise<void> }): ((held: HeldTransaction) => Promise<void>) | undefined {
  if (token === undefined) return undefined;
  let last = 0;
  return async (held) => {
    const now = Date.now();
    if (now - last < PROGRESS_EVERY_MS) return;
    last = now;
    const created = Date.parse(held.createdAt);
    await extra
      .sendNotification({
        method: 'notifications/progress',
        params: {
          progressToken: token,
          progress: Math.max(0, Math.round((now - created) / 1000)),
          total: Math.round((Date.parse(held.expiresAt) - created) / 1000),
          message: `Held for a human approval (business transaction ${held.decided.tx.businessTransactionId}) until ${held.expiresAt}.`,
        },
      })
      .catch(() => undefined);
  };
}

/** `<scheme>://<host>/trust-records/<id>` as the client reached this service (behind a proxy: SVC_TRUST_PROXY). */
function recordUrlOf(req: Request): (id: string) => string {
  return (id) => {
    const path = `/trust-records/${encodeURIComponent(id)}`;
    try {
      return new URL(path, `${req.protocol}://${req.get('host') ?? 'localhost'}`).href;
    } catch {
      return path;
    }
  };
}

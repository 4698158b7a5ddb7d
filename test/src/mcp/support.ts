/**
 * The real parts of the MCP gateway's tests: the official SDK's Client as the agent, upstream
 * servers written with the SDK (a stdio one the gateway spawns, an HTTPS one on loopback behind the
 * test DNS server and CA), and the maker-checker steps that register them.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { bearer, governed, type TestKey, type TestNetwork, type TestHttpsServer } from '@ets/test-support';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
export const SCRIPTED_UPSTREAM = path.join(here, 'fixtures', 'scripted-upstream.mjs');
export const SERVER_EVERYTHING = path.join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const INSPECTOR_CLI = path.join(root, 'node_modules/@modelcontextprotocol/inspector-cli/build/cli.js');

/** A SVC_MCP_STDIO_SERVERS file in a fresh folder (`servers` may place files, such as call logs, in it). */
export function stdioServersFile(servers: (dir: string) => Record<string, { command: string; args?: string[]; env?: Record<string, string> }>): { file: string; dir: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-mcp-'));
  const file = path.join(dir, 'stdio-servers.json');
  writeFileSync(file, JSON.stringify(servers(dir)));
  return { file, dir };
}

/** The scripted upstream as a stdio server; `log` gets a line per start and per tools/call. */
export const scripted = (log: string, list: 'honest' | 'liar' = 'honest') => ({
  command: process.execPath,
  args: [SCRIPTED_UPSTREAM],
  env: { SCRIPTED_LOG: log, SCRIPTED_LIST: list },
});

export type ScriptedLine = { started?: number; tool?: string; arguments?: Record<string, unknown>; pid?: number };
export function readLog(file: string): ScriptedLine[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as ScriptedLine);
  } catch {
    return [];
  }
}

/** The SDK's client connected to the gateway as `key` (or with no Authorization header). */
export async function agent(baseUrl: string, key?: TestKey): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), key ? { requestInit: { headers: { Authorization: bearer(key) } } } : {});
  await client.connect(transport);
  return client;
}

/** The tool names the gateway lists, asked again (up to `timeoutMs`) until `done` holds. */
export async function toolNames(client: Client, done: (names: string[]) => boolean, timeoutMs = 30_000): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const names = (await client.listTools()).tools.map((t) => t.name);
    if (done(names) || Date.now() > until) return names;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * An HTTPS upstream written with the SDK (stateful: it issues session ids and counts them, so a
 * test can see the gateway keep and reuse its session), with the tools `create_invoice` and
 * `lookup`. `calls` holds every tools/call it received.
 */
export async function httpsUpstream(network: TestNetwork, host: string): Promise<TestHttpsServer & { sessions: () => number; calls: { name: string; arguments: unknown }[] }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const calls: { name: string; arguments: unknown }[] = [];
  let sessions = 0;
  const make = () => {
    const server = new Server({ name: 'crm', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        {
          name: 'create_invoice',
          description: 'Creates an invoice',
          inputSchema: { type: 'object', properties: { customerId: { type: 'string' }, amount: { type: 'number', minimum: 0 } }, required: ['customerId', 'amount'], additionalProperties: false },
        },
        { name: 'lookup', description: 'Looks a customer up', inputSchema: { type: 'object', properties: { customerId: { type: 'string' } }, required: ['customerId'] } },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (r) => {
      calls.push({ name: r.params.name, arguments: r.params.arguments });
      return { content: [{ type: 'text', text: `${r.params.name} done` }], structuredContent: { invoiceId: `inv-${calls.length}` } };
    });
    return server;
  };
  const handler = (req: IncomingMessage, res: ServerResponse, body: string) => {
    void (async () => {
      const id = req.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? transports.get(id) : undefined;
      if (!transport) {
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: randomUUID,
          onsessioninitialized: (sid) => {
            sessions++;
            transports.set(sid, transport!);
          },
        });
        await make().connect(transport);
      }
      await transport.handleRequest(req, res, body === '' ? undefined : JSON.parse(body));
    })().catch(() => res.destroy());
  };
  const srv = await network.https(host, handler);
  return Object.assign(srv, { sessions: () => sessions, calls });
}

/** Registers an upstream by maker-checker (`maker` proposes, `checker` approves); returns the approved change. */
export const registerMcpServer = (baseUrl: string, maker: TestKey, checker: TestKey, body: Record<string, unknown>) =>
  governed(baseUrl, '/mcp-servers', maker, checker, { kind: 'register', reason: 'tests', ...body });

export const revokeMcpServer = (baseUrl: string, maker: TestKey, checker: TestKey, name: string) => governed(baseUrl, '/mcp-servers', maker, checker, { kind: 'revoke', name, reason: 'tests' });

/** A policy that decides MCP calls: `amount` above 1000 is refused, above 500 needs an override, the rest is approved. */
export const mcpPolicy = (name: string) => ({
  name,
  policyVersion: '1.0.0',
  description: 'MCP gateway tests',
  signalsSchema: { amount: { type: 'number' as const } },
  rules: [
    { id: 'too-much', when: 'has(signals.amount) && signals.amount > 1000', action: 'reject' as const, reason: 'Amount over 1000' },
    { id: 'look-closer', when: 'has(signals.amount) && signals.amount > 500', action: 'approve' as const, requires_override: true, reason: 'Amount over 500 needs a second look' },
    { id: 'ok', when: 'true', action: 'approve' as const, reason: 'Within limits' },
  ],
  default: { action: 'reject' as const, reason: 'No rule matched' },
});

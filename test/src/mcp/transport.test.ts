import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import request from 'supertest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, LATEST_PROTOCOL_VERSION, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { PolicyDocument } from '@ets/domain';
import { TypeOrmMcpServerStore } from '@ets/adapters-persistence';
import { apiKeysEnv, bearer, makeKey, publishPolicy, REQUEST_TABLES, rowCounts, sqliteTarget, startTestServer, STORAGE_TARGETS, type TestServer } from '@ets/test-support';
import { agent, mcpPolicy, registerMcpServer, scripted, stdioServersFile, toolNames } from './support.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent7 = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'] });

const ACCEPT = 'application/json, text/event-stream';
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
const LIST = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
/** Every table a request can write, the authentication audit aside (written for every request). */
const TABLES = [...REQUEST_TABLES, 'mcp_servers'];

/** The JSON-RPC messages of an SSE body (`event: message`, `data: …`). */
const sseMessages = (text: string): Record<string, unknown>[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l.length > 6)
    .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);

async function mcpServer(factory: typeof sqliteTarget, env: Record<string, string> = {}) {
  const stdio = stdioServersFile((dir) => ({ scripted: scripted(path.join(dir, 'scripted.log')) }));
  const server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent7), SVC_MCP_STDIO_SERVERS: stdio.file, ...env });
  try {
    await publishPolicy(server.dataSource, mcpPolicy('mcp-tools') as PolicyDocument);
    const upstream = { name: 'scripted', stdio: 'scripted', policyName: 'mcp-tools', tools: ['echo'], timeoutMs: 10000 };
    if (env.SVC_AUTH_DISABLED === 'true') {
      // Nobody can propose without a key (only a USER key may): registered as an approved change would.
      const at = new Date().toISOString();
      await new TypeOrmMcpServerStore(server.dataSource).activate({ registrationId: randomUUID(), url: null, proposer: 'alice', approvedBy: 'bob', registeredAt: at, ...upstream });
    } else {
      await registerMcpServer(server.url, alice, bob, upstream);
    }
  } catch (e) {
    await server.destroy();
    throw e;
  }
  return { server, stdio };
}

describe.each(STORAGE_TARGETS)('/mcp on $name: the Streamable HTTP transport, its security rules, and bad input', (factory) => {
  let server: TestServer;
  let stdio: { dir: string };
  let client: Client;

  beforeAll(async () => {
    ({ server, stdio } = await mcpServer(factory, { SVC_MCP_ALLOWED_ORIGINS: 'http://localhost:6274' }));
    client = await agent(server.url, agent7);
    await toolNames(client, (n) => n.includes('scripted__echo'));
  });
  afterAll(async () => {
    await client?.close();
    await server?.destroy();
    rmSync(stdio.dir, { recursive: true, force: true });
  });

  const post = (body: unknown, headers: Record<string, string> = {}) => {
    let r = request(server.url).post('/mcp').set('authorization', bearer(agent7)).set('accept', ACCEPT).set('content-type', 'application/json');
    for (const [k, v] of Object.entries(headers)) r = r.set(k, v);
    return r.send(typeof body === 'string' ? body : JSON.stringify(body));
  };

  it('authentication comes first: no key, a wrong key or two Authorization headers is 401 before any MCP, and audited', async () => {
    for (const auth of [undefined, 'Bearer pk_local_wrong', 'Basic eDp5']) {
      let r = request(server.url).post('/mcp').set('accept', ACCEPT).set('content-type', 'application/json');
      if (auth) r = r.set('authorization', auth);
      const res = await r.send(JSON.stringify(INITIALIZE));
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: 'authentication required' });
    }
    await expect(agent(server.url)).rejects.toThrow();
    const events = (await request(server.url).get('/audit/auth-events?limit=100').set('authorization', bearer(alice))).body.events as Record<string, unknown>[];
    expect(events.find((e) => e.route === '/mcp' && e.outcome === 'FAILURE')).toMatchObject({ method: 'POST', callerId: null });
    expect(events.find((e) => e.route === '/mcp' && e.outcome === 'SUCCESS')).toMatchObject({ method: 'POST', callerId: 'agent-7' });
  });

  it('answers initialize on an SSE stream with no session id (stateless), and a notification with 202', async () => {
    const res = await post(INITIALIZE);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['mcp-session-id']).toBeUndefined();
    const [answer] = sseMessages(res.text);
    expect(answer).toMatchObject({ jsonrpc: '2.0', id: 1, result: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: { tools: {} }, serverInfo: { name: 'ets' } } });
    const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-protocol-version': LATEST_PROTOCOL_VERSION });
    expect(note.status).toBe(202);
    expect(note.text).toBe('');
  });

  it('validates the Origin header against DNS rebinding: another origin is 403, a listed one and none pass', async () => {
    for (const origin of ['https://evil.example.com', 'null', 'http://localhost:6275']) {
      const res = await post(LIST, { origin });
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 }, id: null });
    }
    expect((await post(LIST, { origin: 'http://localhost:6274' })).status).toBe(200);
    expect((await post(LIST)).status).toBe(200);
  });

  it('keeps the rules of the transport: Accept with both types (406), a supported MCP-Protocol-Version (400), GET and DELETE 405', async () => {
    for (const accept of ['application/json', 'text/event-stream', '*/*']) expect((await post(LIST, { accept })).status).toBe(406);
    const bad = await post(LIST, { 'mcp-protocol-version': '1999-01-01' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: expect.stringContaining('Unsupported protocol version') }, id: null });
    expect((await post(LIST, { 'mcp-protocol-version': '2025-06-18' })).status).toBe(200);
    for (const method of ['get', 'delete'] as const) {
      const res = await request(server.url)[method]('/mcp').set('authorization', bearer(agent7)).set('accept', 'text/event-stream');
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('POST');
      expect(res.body).toEqual({ error: `${method.toUpperCase()} is not allowed on /mcp; it takes POST.` });
    }
  });

  it('malformed input is a clear 4xx, never a 500: the body rules of every route, then JSON-RPC errors', async () => {
    const cases: [string | object, number, Record<string, string>?][] = [
      ['', 400],
      ['{"jsonrpc":"2.0",', 400],
      ['{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}', 400],
      ['{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"a\\u0000b"}}', 400],
      [{ jsonrpc: '2.0', id: 9007199254740992, method: 'tools/list' }, 400],
      [{ hello: 'world' }, 400],
      [{ jsonrpc: '1.0', id: 1, method: 'tools/list' }, 400],
      [[], 400],
      [LIST, 415, { 'content-type': 'text/plain' }],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(2 * 1024 * 1024) } }, 413],
    ];
    for (const [body, status, headers] of cases) {
      const text = typeof body === 'string' ? body : JSON.stringify(body).replace('9007199254740992', '9007199254740993');
      const res = await post(text, headers);
      expect({ body: text.slice(0, 80), status: res.status }).toEqual({ body: text.slice(0, 80), status });
    }
  });

  it('fuzz: arbitrary JSON-RPC-ish messages, unknown tools and arguments that break the schema are clear errors, never a 500, and store nothing', async () => {
    const before = await rowCounts(server.dataSource, TABLES);
    const value = fc.oneof(fc.jsonValue(), fc.string(), fc.integer(), fc.constant(null));
    const message = fc.oneof(
      fc.jsonValue(),
      fc.record({ jsonrpc: fc.oneof(fc.constant('2.0'), value), id: fc.oneof(fc.integer(), fc.string(), value), method: fc.oneof(fc.constantFrom('tools/list', 'tools/call', 'initialize', 'ping', 'resources/list', 'nope'), fc.string()), params: value }, { requiredKeys: [] }),
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer(), method: fc.constant('tools/call'), params: fc.record({ name: fc.oneof(fc.string(), fc.constantFrom('scripted__echo', 'scripted__hang', 'nobody__x', 'scripted__')), arguments: value }, { requiredKeys: [] }) }),
    );
    await fc.assert(
      fc.asyncProperty(message, async (m) => {
        const res = await post(JSON.stringify(m));
        expect([200, 202, 400]).toContain(res.status);
        if (res.status === 200) {
          for (const answer of sseMessages(res.text)) {
            const result = answer.result as { isError?: boolean; _meta?: Record<string, unknown> } | undefined;
            // A call can only have been decided with arguments that keep the echo tool's schema, which these never do.
            if (result?._meta) expect(result).toMatchObject({ isError: true, _meta: { 'ets/error': { code: expect.stringMatching(/^ARGUMENTS_/) } } });
          }
        }
      }),
      { numRuns: 150 },
    );
    // Through the SDK's client: arguments that break the schema (an extra property, a wrong type, too large) and unknown tools.
    const args = fc.oneof(
      fc.dictionary(fc.string({ minLength: 1 }), fc.jsonValue()).map((d) => ({ ...d, unexpected: 1 })),
      fc.record({ text: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.string({ minLength: 1001, maxLength: 1100 })) }),
      fc.constant({ text: 'é'.repeat(40_000) }),
    );
    await fc.assert(
      fc.asyncProperty(args, async (a) => {
        let result: { isError?: boolean; _meta?: Record<string, { code?: string }> };
        try {
          result = (await client.callTool({ name: 'scripted__echo', arguments: a as Record<string, unknown> })) as typeof result;
        } catch (e) {
          // What the body rules of every route refuse (an integer beyond ±(2^53 − 1), U+0000): a 400 before any MCP.
          expect(e).toBeInstanceOf(StreamableHTTPError);
          expect((e as StreamableHTTPError).code).toBe(400);
          return;
        }
        expect(result.isError).toBe(true);
        expect(result._meta?.['ets/error']?.code).toMatch(/^ARGUMENTS_(INVALID|TOO_LARGE)$/);
      }),
      { numRuns: 60 },
    );
    await fc.assert(
      fc.asyncProperty(fc.string(), async (name) => {
        fc.pre(name !== 'scripted__echo');
        const e = await client.callTool({ name, arguments: {} }).then(() => undefined, (x: unknown) => x);
        expect(e).toBeInstanceOf(McpError);
        expect((e as McpError).code).toBe(ErrorCode.InvalidParams);
      }),
      { numRuns: 60 },
    );
    expect(await rowCounts(server.dataSource, TABLES)).toEqual(before);
  });
});

describe('/mcp on sqlite: rate limits and SVC_AUTH_DISABLED', () => {
  it('each tools/call counts against the caller execute limit (429 with Retry-After, nothing decided); tools/list does not', async () => {
    const { server, stdio } = await mcpServer(sqliteTarget, { RATE_LIMIT_EXECUTE_PER_MINUTE: '3' });
    const client = await agent(server.url, agent7);
    try {
      await toolNames(client, (n) => n.includes('scripted__echo'));
      for (let i = 0; i < 5; i++) await client.listTools();
      for (let i = 0; i < 3; i++) expect(await client.callTool({ name: 'scripted__echo', arguments: { text: `n${i}` } })).toMatchObject({ content: [{ text: `echo: n${i}` }] });
      const before = await rowCounts(server.dataSource, TABLES);
      const res = await request(server.url)
        .post('/mcp')
        .set('authorization', bearer(agent7))
        .set('accept', ACCEPT)
        .set('content-type', 'application/json')
        .send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'scripted__echo', arguments: { text: 'one too many' } } }));
      expect(res.status).toBe(429);
      expect(res.body).toEqual({ error: 'Rate limit exceeded. Try again later.', code: 'RATE_LIMITED' });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(await rowCounts(server.dataSource, TABLES)).toEqual(before);
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('scripted__echo');
    } finally {
      await client.close();
      await server.destroy();
      rmSync(stdio.dir, { recursive: true, force: true });
    }
  });

  it('with SVC_AUTH_DISABLED the gateway works without a key, as every route does', async () => {
    const { server, stdio } = await mcpServer(sqliteTarget, { SVC_AUTH_DISABLED: 'true' });
    const client = await agent(server.url);
    try {
      await toolNames(client, (n) => n.includes('scripted__echo'));
      const result = (await client.callTool({ name: 'scripted__echo', arguments: { text: 'open' } })) as { _meta?: Record<string, { businessTransactionId?: string }> };
      const id = result._meta!['ets/trustRecord']!.businessTransactionId!;
      expect((await request(server.url).get(`/trust-records/${id}`)).body).toMatchObject({ callerId: 'anonymous', transaction: { authority: { principalId: 'anonymous' } } });
    } finally {
      await client.close();
      await server.destroy();
      rmSync(stdio.dir, { recursive: true, force: true });
    }
  });
});

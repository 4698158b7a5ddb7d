import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rmSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { PolicyDocument } from '@ets/domain';
import { apiKeysEnv, bearer, makeKey, publishPolicy, startTestNetwork, startTestServer, STORAGE_TARGETS, type TestNetwork, type TestServer } from '@ets/test-support';
import { agent, httpsUpstream, mcpPolicy, readLog, registerMcpServer, scripted, stdioServersFile, toolNames } from './support.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent7 = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'] });

type ToolResult = { content: { type: string; text?: string }[]; isError?: boolean; _meta?: Record<string, Record<string, unknown>> };

/**
 * Upstreams that hang, crash, lie in tools/list, redirect or move to an address no longer allowed:
 * each is a clear outcome, an unknown one is recorded as unknown and never retried, and every
 * egress rule of external connectors holds for MCP URLs (at proposal and at every request).
 */
describe.each(STORAGE_TARGETS)('MCP gateway on $name: upstreams that fail', (factory) => {
  let network: TestNetwork;
  let server: TestServer;
  let stdio: { file: string; dir: string };
  let client: Client;
  const flakyLog = () => path.join(stdio.dir, 'flaky.log');

  beforeAll(async () => {
    network = await startTestNetwork();
    stdio = stdioServersFile((dir) => ({ flaky: scripted(path.join(dir, 'flaky.log')), liar: scripted(path.join(dir, 'liar.log'), 'liar') }));
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent7), ...network.env, SVC_MCP_STDIO_SERVERS: stdio.file });
    await publishPolicy(server.dataSource, mcpPolicy('mcp-tools') as PolicyDocument);
    await registerMcpServer(server.url, alice, bob, { name: 'flaky', stdio: 'flaky', policyName: 'mcp-tools', tools: ['*'], timeoutMs: 1500 });
    // The same stdio server again (its own process), with a timeout a restart fits in on a loaded machine.
    await registerMcpServer(server.url, alice, bob, { name: 'crashy', stdio: 'flaky', policyName: 'mcp-tools', tools: ['crash', 'echo'], timeoutMs: 20000 });
    await registerMcpServer(server.url, alice, bob, { name: 'liar', stdio: 'liar', policyName: 'mcp-tools', tools: ['*'] });
    client = await agent(server.url, agent7);
    await toolNames(client, (n) => n.includes('flaky__echo') && n.includes('liar__echo') && n.includes('crashy__echo'));
  });
  afterAll(async () => {
    await client?.close();
    await server?.destroy();
    await network?.close();
    rmSync(stdio.dir, { recursive: true, force: true });
  });

  const call = async (name: string, args: Record<string, unknown> = {}) => (await client.callTool({ name, arguments: args })) as unknown as ToolResult;
  const intentState = async (id: string) => (await request(server.url).get(`/execution-intents/${id}`).set('authorization', bearer(alice))).body.status.state as string;
  const callsOf = (tool: string) => readLog(flakyLog()).filter((l) => l.tool === tool);
  const starts = () => readLog(flakyLog()).filter((l) => l.started !== undefined).length;
  const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('an upstream that hangs: the call times out as an unknown outcome, its intent ERRORED, and it is never sent again', async () => {
    const result = await call('flaky__hang');
    expect(result).toMatchObject({ isError: true, _meta: { 'ets/error': { code: 'EXECUTION_OUTCOME_UNKNOWN', executionStatus: 'EXECUTION_UNKNOWN' } } });
    const id = result._meta!['ets/error']!.businessTransactionId as string;
    expect(await intentState(id)).toBe('ERRORED');
    await settle(2000);
    expect(callsOf('hang')).toHaveLength(1);
  });

  it('an upstream that crashes mid-call: unknown outcome; the process is restarted with back-off, by itself, and the next call works', async () => {
    const before = starts();
    const result = await call('crashy__crash');
    expect(result).toMatchObject({ isError: true, _meta: { 'ets/error': { code: 'EXECUTION_OUTCOME_UNKNOWN' } } });
    expect(await intentState(result._meta!['ets/error']!.businessTransactionId as string)).toBe('ERRORED');
    // Restarted without a call asking for it.
    for (let i = 0; i < 200 && starts() === before; i++) await settle(100);
    expect(starts()).toBe(before + 1);
    expect(await call('crashy__echo', { text: 'after the crash' })).toMatchObject({ content: [{ type: 'text', text: 'echo: after the crash' }], _meta: { 'ets/trustRecord': expect.any(Object) } });
    // Crash again at once: the next call waits for the restart (after a longer back-off) and still works; nothing was retried.
    await call('crashy__crash');
    expect(await call('crashy__echo', { text: 'again' })).toMatchObject({ content: [{ type: 'text', text: 'echo: again' }] });
    expect(callsOf('crash')).toHaveLength(2);
    expect(starts()).toBe(before + 2);
  });

  it('an upstream that lies in tools/list: names listed twice, names MCP does not allow, colliding capabilities and unusable schemas are not offered', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('liar__'));
    expect(names.sort()).toEqual(['liar__crash', 'liar__echo', 'liar__env', 'liar__fail', 'liar__grow', 'liar__hang', 'liar__slow']);
    for (const lie of ['liar__twice', 'liar__has space', 'liar__2fa', 'liar__get_user', 'liar__Get-User', 'liar__bad_schema', 'liar__remote_ref']) {
      await expect(client.callTool({ name: lie, arguments: {} })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
    }
    expect(readLog(path.join(stdio.dir, 'liar.log')).filter((l) => l.tool !== undefined)).toEqual([]);
  });

  it('an HTTPS upstream that hangs or redirects offers no tools and holds up no other server; a redirect is never followed', async () => {
    const stuck = await network.https('mcp.stuck.test', () => undefined);
    const target = await httpsUpstream(network, 'mcp.target.test');
    const redirect = await network.https('mcp.redirect.test', (_req, res) => {
      res.writeHead(307, { location: target.url('/mcp') });
      res.end();
    });
    await registerMcpServer(server.url, alice, bob, { name: 'stuck', url: stuck.url('/mcp'), policyName: 'mcp-tools', tools: ['*'], timeoutMs: 1000 });
    await registerMcpServer(server.url, alice, bob, { name: 'redirect', url: redirect.url('/mcp'), policyName: 'mcp-tools', tools: ['*'], timeoutMs: 2000 });
    for (let i = 0; i < 2; i++) {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names.filter((n) => n.startsWith('stuck__') || n.startsWith('redirect__'))).toEqual([]);
      expect(names).toContain('flaky__echo');
    }
    expect(redirect.received.length).toBeGreaterThan(0);
    expect(target.received).toEqual([]);
  });

  it('every egress rule holds for an MCP URL: at proposal (400 naming url) and at every request (rebinding: nothing is sent)', async () => {
    network.dns.set('private.mcp.test', { A: ['10.0.0.8'] });
    for (const url of ['https://127.0.0.1/mcp', 'https://[::1]/mcp', 'https://2130706433/mcp', 'http://mcp.crm.test/mcp', 'https://localhost/mcp', 'https://u:p@mcp.crm.test/mcp', 'https://mcp.crm.test:0/mcp', 'https://private.mcp.test/mcp', 'https://nowhere.mcp.test/mcp']) {
      const r = await request(server.url).post('/mcp-servers/changes').set('authorization', bearer(alice)).send({ kind: 'register', name: 'bad', url, policyName: 'mcp-tools', tools: ['*'] });
      expect({ url, status: r.status, error: r.body.error }).toEqual({ url, status: 400, error: expect.stringMatching(/^url /) });
    }
    const upstream = await httpsUpstream(network, 'mcp.rebind.test');
    await registerMcpServer(server.url, alice, bob, { name: 'rebind', url: upstream.url('/mcp'), policyName: 'mcp-tools', tools: ['*'] });
    expect(await toolNames(client, (n) => n.includes('rebind__lookup'))).toContain('rebind__lookup');
    const seen = upstream.received.length;
    // The name now answers an address that is not allowed: the next request sends nothing.
    network.dns.set('mcp.rebind.test', { A: ['10.0.0.9'] });
    const result = await call('rebind__lookup', { customerId: 'c-1' });
    expect(result).toMatchObject({ isError: true, _meta: { 'ets/error': { code: 'RUNTIME_ERROR', executionStatus: 'NOT_EXECUTED' } } });
    expect(await intentState(result._meta!['ets/error']!.businessTransactionId as string)).toBe('ERRORED');
    expect(upstream.received.length).toBe(seen);
    expect(upstream.calls).toEqual([]);
  });
});

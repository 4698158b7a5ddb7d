import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { PolicyDocument } from '@ets/domain';
import { apiKeysEnv, bearer, makeKey, publishPolicy, startTestNetwork, startTestServer, STORAGE_TARGETS, type TestNetwork, type TestServer } from '@ets/test-support';
import { agent, httpsUpstream, INSPECTOR_CLI, mcpPolicy, registerMcpServer, scripted, stdioServersFile, toolNames } from './support.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent7 = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'] });

/** Runs the MCP Inspector's CLI (its npm bin) against the gateway; resolves with its exit code and output. */
function inspector(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // From its own build folder: the CLI looks for its package.json relative to the working
    // directory, then imports it relative to itself (inspector-cli 1.0.3), which agree only there.
    const child = spawn(process.execPath, [INSPECTOR_CLI, ...args], { cwd: path.dirname(INSPECTOR_CLI), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The JSON object the inspector prints (its output is the answer, pretty-printed). */
const printed = (stdout: string): Record<string, unknown> => JSON.parse(stdout.slice(stdout.indexOf('{'), stdout.lastIndexOf('}') + 1)) as Record<string, unknown>;

describe.each(STORAGE_TARGETS)('MCP gateway on $name: concurrent agents, and the MCP Inspector as a client', (factory) => {
  let network: TestNetwork;
  let server: TestServer;
  let stdio: { file: string; dir: string };
  let crm: Awaited<ReturnType<typeof httpsUpstream>>;
  let clients: Client[] = [];

  beforeAll(async () => {
    network = await startTestNetwork();
    stdio = stdioServersFile((dir) => ({ scripted: scripted(path.join(dir, 'scripted.log')) }));
    server = await startTestServer(factory, { ...apiKeysEnv(alice, bob, agent7), ...network.env, SVC_MCP_STDIO_SERVERS: stdio.file });
    await publishPolicy(server.dataSource, mcpPolicy('mcp-tools') as PolicyDocument);
    crm = await httpsUpstream(network, 'mcp.concurrent.test');
    await registerMcpServer(server.url, alice, bob, { name: 'crm', url: crm.url('/mcp'), policyName: 'mcp-tools', tools: ['create_invoice'] });
    await registerMcpServer(server.url, alice, bob, { name: 'scripted', stdio: 'scripted', policyName: 'mcp-tools', tools: ['echo'], timeoutMs: 10000 });
    clients = await Promise.all([0, 1, 2, 3].map(() => agent(server.url, agent7)));
    await toolNames(clients[0]!, (n) => n.includes('crm__create_invoice') && n.includes('scripted__echo'));
  });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await server?.destroy();
    await network?.close();
    rmSync(stdio.dir, { recursive: true, force: true });
  });

  it('32 concurrent tools/call keep one intent each: 32 transactions, 32 FINALIZED intents, 32 calls upstream, each once', async () => {
    const before = crm.calls.length;
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => clients[i % clients.length]!.callTool({ name: 'crm__create_invoice', arguments: { customerId: `c-${i}`, amount: i } })),
    );
    const ids = results.map((r) => ((r as { _meta?: Record<string, { businessTransactionId?: string }> })._meta?.['ets/trustRecord']?.businessTransactionId) as string);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(32);
    const sent = crm.calls.slice(before).map((c) => (c.arguments as { customerId: string }).customerId).sort();
    expect(sent).toEqual(Array.from({ length: 32 }, (_, i) => `c-${i}`).sort());
    for (const id of ids) {
      const intent = await request(server.url).get(`/execution-intents/${id}`).set('authorization', bearer(alice));
      expect(intent.status).toBe(200);
      expect(intent.body).toMatchObject({ intent: { businessTransactionId: id, action: 'mcp-crm:create-invoice', connector: 'mcp-crm' }, status: { state: 'FINALIZED' } });
    }
    // One intent per transaction in the store, and one upstream session for all of them.
    const rows = (await server.dataSource.query(`SELECT business_transaction_id AS id, COUNT(*) AS n FROM execution_intents GROUP BY business_transaction_id`)) as { id: string; n: string | number }[];
    expect(rows.filter((r) => ids.includes(r.id)).map((r) => Number(r.n))).toEqual(Array(32).fill(1));
    expect(crm.sessions()).toBe(1);
  });

  it('the MCP Inspector CLI lists and calls a tool through the gateway, with the bearer key in a header', async () => {
    const url = `${server.url}/mcp`;
    const auth = `Authorization: Bearer ${agent7.raw}`;
    const listed = await inspector(['--cli', url, '--transport', 'http', '--header', auth, '--method', 'tools/list']);
    expect(`${listed.code} ${listed.stdout.slice(0, 800)} ${listed.stderr.slice(0, 1500)}`).toMatch(/^0 /);
    expect((printed(listed.stdout).tools as { name: string }[]).map((t) => t.name).sort()).toEqual(['crm__create_invoice', 'scripted__echo']);
    const called = await inspector(['--cli', url, '--transport', 'http', '--header', auth, '--method', 'tools/call', '--tool-name', 'scripted__echo', '--tool-arg', 'text=from the inspector']);
    expect(called.code).toBe(0);
    expect(printed(called.stdout)).toMatchObject({ content: [{ type: 'text', text: 'echo: from the inspector' }], _meta: { 'ets/trustRecord': { businessTransactionId: expect.any(String) } } });
    // Without the key: refused before any MCP.
    const refused = await inspector(['--cli', url, '--transport', 'http', '--method', 'tools/list']);
    expect(refused.code).not.toBe(0);
  });
});

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rmSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { PolicyDocument } from '@ets/domain';
import { unwrapServedRecord, verifyOffline } from '@ets/adapters-crypto';
import {
  apiKeysEnv,
  bearer,
  envelope,
  heldApproval,
  makeKey,
  publishPolicy,
  startTestNetwork,
  startTestServer,
  STORAGE_TARGETS,
  type TestKey,
  type TestNetwork,
  type TestServer,
} from '@ets/test-support';
import { agent, httpsUpstream, toolNames, mcpPolicy, readLog, registerMcpServer, revokeMcpServer, scripted, SERVER_EVERYTHING, stdioServersFile } from './support.js';

const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const agent7 = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'] });
/** May call one tool of one server. */
const narrow = makeKey('narrow', { holder: 'SERVICE', capabilities: ['mcp-crm:lookup'] });

type ToolResult = { content: { type: string; text?: string }[]; isError?: boolean; structuredContent?: unknown; _meta?: Record<string, Record<string, unknown>> };

describe.each(STORAGE_TARGETS)('MCP gateway on $name: upstreams by maker-checker, tools/list and tools/call through the pipeline', (factory) => {
  let network: TestNetwork;
  let server: TestServer;
  let stdio: { file: string; dir: string };
  let crm: Awaited<ReturnType<typeof httpsUpstream>>;
  let client: Client;
  const log = () => path.join(stdio.dir, 'scripted.log');

  beforeAll(async () => {
    network = await startTestNetwork();
    stdio = stdioServersFile((dir) => ({
      everything: { command: process.execPath, args: [SERVER_EVERYTHING, 'stdio'] },
      scripted: scripted(path.join(dir, 'scripted.log')),
    }));
    server = await startTestServer(factory, {
      ...apiKeysEnv(alice, bob, agent7, narrow),
      ...network.env,
      SVC_MCP_STDIO_SERVERS: stdio.file,
      // The stdio child must not inherit what the service holds.
      SVC_SIGNING_PROVIDER: 'disk',
      // Held calls wait 10 seconds for a human here.
      SVC_MCP_HOLD_SECONDS: '10',
    });
    for (const name of ['crm-tools', 'scripted-tools', 'everything-tools']) await publishPolicy(server.dataSource, mcpPolicy(name) as PolicyDocument);
    crm = await httpsUpstream(network, 'mcp.crm.test');
    await registerMcpServer(server.url, alice, bob, { name: 'crm', url: crm.url('/mcp'), policyName: 'crm-tools', tools: ['*'] });
    await registerMcpServer(server.url, alice, bob, { name: 'scripted', stdio: 'scripted', policyName: 'scripted-tools', tools: ['echo', 'fail', 'env', 'grow', 'extra'], timeoutMs: 5000 });
    await registerMcpServer(server.url, alice, bob, { name: 'everything', stdio: 'everything', policyName: 'everything-tools', tools: ['echo', 'get-sum'] });
    client = await agent(server.url, agent7);
    // A cold start: the first listing of a stdio server may end before its process is up.
    await toolNames(client, (names) => names.includes('scripted__echo') && names.includes('everything__echo'));
  });
  afterAll(async () => {
    await client?.close();
    await server?.destroy();
    await network?.close();
    rmSync(stdio.dir, { recursive: true, force: true });
  });

  const call = async (name: string, args: Record<string, unknown>, as: Client = client) => (await as.callTool({ name, arguments: args })) as unknown as ToolResult;
  const get = (p: string, key: TestKey = alice) => request(server.url).get(p).set('authorization', bearer(key));

  it('lists the registered servers, and offers the tools of each that its registration allows, named <server>__<tool>', async () => {
    const active = await get('/mcp-servers');
    expect(active.status).toBe(200);
    expect(active.body.items.map((s: { name: string }) => s.name)).toEqual(['crm', 'everything', 'scripted']);
    expect(active.body.items[0]).toMatchObject({ name: 'crm', url: crm.url('/mcp'), stdio: null, policyName: 'crm-tools', tools: ['*'], timeoutMs: 10000, proposer: 'alice', approvedBy: 'bob' });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['crm__create_invoice', 'crm__lookup', 'everything__echo', 'everything__get-sum', 'scripted__echo', 'scripted__env', 'scripted__fail', 'scripted__grow']);
    expect(tools.find((t) => t.name === 'crm__create_invoice')).toEqual({
      name: 'crm__create_invoice',
      description: 'Creates an invoice',
      inputSchema: { type: 'object', properties: { customerId: { type: 'string' }, amount: { type: 'number', minimum: 0 } }, required: ['customerId', 'amount'], additionalProperties: false },
    });
  });

  it("a key's allowedCapabilities gate both tools/list and tools/call", async () => {
    const limited = await agent(server.url, narrow);
    try {
      expect((await limited.listTools()).tools.map((t) => t.name)).toEqual(['crm__lookup']);
      await expect(limited.callTool({ name: 'crm__create_invoice', arguments: { customerId: 'c-1', amount: 5 } })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
      expect(await call('crm__lookup', { customerId: 'c-1' }, limited)).toMatchObject({ content: [{ type: 'text', text: 'lookup done' }] });
    } finally {
      await limited.close();
    }
  });

  it('an approved call is released once upstream; its result carries the Trust Record, which verifies, has a receipt, replays, verifies offline and is in the log', async () => {
    const before = crm.calls.length;
    const result = await call('crm__create_invoice', { customerId: 'c-42', amount: 120 });
    expect(crm.calls.slice(before)).toEqual([{ name: 'create_invoice', arguments: { customerId: 'c-42', amount: 120 } }]);
    expect(result.content).toEqual([{ type: 'text', text: 'create_invoice done' }]);
    const trust = result._meta!['ets/trustRecord']!;
    const id = trust.businessTransactionId as string;
    expect(trust.verifyUrl).toBe(`${server.url}/trust-records/${id}`);

    const record = await get(`/trust-records/${id}`);
    expect(record.status).toBe(200);
    expect(record.body).toMatchObject({
      businessTransactionId: id,
      callerId: 'agent-7',
      transaction: {
        metadata: { mcpServer: 'crm', mcpTool: 'create_invoice' },
        authority: { principalId: 'agent-7' },
        intent: { action: 'mcp-crm:create-invoice', parameters: { customerId: 'c-42', amount: 120 } },
        policy: { name: 'crm-tools', version: '1.0.0' },
        signals: { customerId: 'c-42', amount: 120 },
      },
      decision: { action: 'approve', matchedRuleId: 'ok' },
    });
    // The result hash covers the upstream's CallToolResult (what it answered, without the gateway's _meta).
    const execution = record.body.executions[0];
    expect(execution).toMatchObject({ connector: 'mcp-crm', status: 'SUCCEEDED', result: { content: [{ type: 'text', text: 'create_invoice done' }], structuredContent: { invoiceId: expect.any(String) } } });
    expect((await get(`/execution-intents/${id}`)).body.status.state).toBe('FINALIZED');

    const verified = await request(server.url).post('/verify').set('authorization', bearer(alice)).send({ businessTransactionId: id });
    expect(verified.status).toBe(200);
    expect(verified.body.status).toBe('VERIFIED');
    const receipt = await request(server.url).post('/receipt').set('authorization', bearer(alice)).send({ businessTransactionId: id });
    expect(receipt.status).toBe(201);
    const replay = await request(server.url).post('/replay').set('authorization', bearer(alice)).send({ businessTransactionId: id });
    expect(replay.status).toBe(200);
    const jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
    // Offline, with the JWKS only: the receipt (with the log's inclusion proof) and the record with its proof.
    const receiptReport = verifyOffline(receipt.body, jwks);
    expect(receiptReport.checks.filter((c) => !c.ok)).toEqual([]);
    expect(receiptReport.checks.map((c) => c.name)).toContain('transparency');
    const withProof = await get(`/trust-records/${id}/proof`);
    expect(withProof.status).toBe(200);
    const unwrapped = unwrapServedRecord(withProof.body);
    const recordReport = verifyOffline(unwrapped.record, jwks, { transparency: unwrapped.transparency });
    expect(recordReport.checks.filter((c) => !c.ok)).toEqual([]);
    expect(recordReport.checks.map((c) => c.name)).toContain('inclusion');
  });

  it('a call the policy refuses is a signed refusal: isError with ets/refusal, nothing sent upstream', async () => {
    const before = crm.calls.length;
    const result = await call('crm__create_invoice', { customerId: 'c-42', amount: 5000 });
    expect(result).toMatchObject({ isError: true, content: [{ type: 'text', text: 'Execution rejected: Amount over 1000' }] });
    const id = result._meta!['ets/refusal']!.businessTransactionId as string;
    const refusal = await get(`/refusal/${id}`);
    expect(refusal.status).toBe(200);
    expect(refusal.body).toMatchObject({ recordType: 'refusal-record', action: 'mcp-crm:create-invoice', matchedRuleId: 'too-much' });
    expect(crm.calls.length).toBe(before);
  });

  /** A held call's transaction, found in the held list by its unique customer id. */
  const heldFor = async (customerId: string): Promise<Record<string, unknown>> => {
    for (let tries = 0; ; tries++) {
      const listed = (await get('/overrides?status=PENDING&pageSize=100')).body as { items: { businessTransactionId: string; parameters: { customerId?: string } }[] };
      const found = listed.items.find((i) => i.parameters.customerId === customerId);
      if (found) return found as unknown as Record<string, unknown>;
      if (tries > 200) throw new Error(`no held transaction for ${customerId}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const heldCall = (customerId: string, progress: unknown[] = []) =>
    client.callTool({ name: 'crm__create_invoice', arguments: { customerId, amount: 700 } }, undefined, { onprogress: (p) => void progress.push(p), timeout: 120_000 }) as Promise<unknown> as Promise<ToolResult>;

  it('a call whose policy requires an override is held until a human approves it; then the upstream is called once and the call returns its result', async () => {
    const before = crm.calls.length;
    const progress: unknown[] = [];
    const answer = heldCall('c-held-1', progress);
    const held = await heldFor('c-held-1');
    const id = held.businessTransactionId as string;
    expect(held).toMatchObject({ callerId: 'agent-7', action: 'mcp-crm:create-invoice', status: 'PENDING', decision: { matchedRuleId: 'look-closer' } });
    expect((await get(`/transactions/${id}`)).body).toMatchObject({ outcome: 'HELD' });
    // The agent is told it waits (progress it asked for), and nothing reached the upstream yet.
    for (let tries = 0; progress.length === 0 && tries < 100; tries++) await new Promise((r) => setTimeout(r, 100));
    expect(progress[0]).toMatchObject({ progress: expect.any(Number), total: 10, message: expect.stringContaining(id) });
    expect(crm.calls.length).toBe(before);
    const tx = { businessTransactionId: id, intent: { action: 'mcp-crm:create-invoice' }, signals: held.signals };
    const approved = await request(server.url).post(`/overrides/${id}/approve`).set('authorization', bearer(bob)).send(heldApproval(bob, tx));
    expect(approved.status).toBe(200);
    const result = await answer;
    expect(result.isError).toBeUndefined();
    expect(result.content).toEqual([{ type: 'text', text: 'create_invoice done' }]);
    expect(result._meta!['ets/trustRecord']).toMatchObject({ businessTransactionId: id });
    expect(crm.calls.slice(before)).toEqual([{ name: 'create_invoice', arguments: { customerId: 'c-held-1', amount: 700 } }]);
    const record = (await get(`/trust-records/${id}`)).body as { override: { approverId: string }; executions: unknown[] };
    expect(record.override.approverId).toBe('bob');
    expect(record.executions).toHaveLength(1);
  });

  it('of 20 concurrent approvals of one held call, one releases it (the others 409): one intent, one call upstream, and the agent gets that one result', async () => {
    const before = crm.calls.length;
    const answer = heldCall('c-held-20');
    const held = await heldFor('c-held-20');
    const id = held.businessTransactionId as string;
    const tx = { businessTransactionId: id, intent: { action: 'mcp-crm:create-invoice' }, signals: held.signals };
    const approvers = [bob, alice];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => request(server.url).post(`/overrides/${id}/approve`).set('authorization', bearer(approvers[i % 2]!)).send(heldApproval(approvers[i % 2]!, tx))),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(19);
    expect(await answer).toMatchObject({ content: [{ type: 'text', text: 'create_invoice done' }] });
    expect(crm.calls.slice(before)).toEqual([{ name: 'create_invoice', arguments: { customerId: 'c-held-20', amount: 700 } }]);
    const intents = (await get('/execution-intents?state=PREPARED,RELEASED,FINALIZED,ERRORED,RESOLVED&pageSize=100')).body as { items: { intent: { businessTransactionId: string } }[] };
    expect(intents.items.filter((i) => i.intent.businessTransactionId === id)).toHaveLength(1);
  });

  it('a held call a human rejects returns isError with ets/override REJECTED; nothing reaches the upstream', async () => {
    const before = crm.calls.length;
    const answer = heldCall('c-held-2');
    const id = (await heldFor('c-held-2')).businessTransactionId as string;
    const rejected = await request(server.url).post(`/overrides/${id}/reject`).set('authorization', bearer(bob)).send(envelope(bob, id, 'reject', { pendingPolicyChangeId: undefined, businessTransactionId: id, reason: 'Not this customer' }));
    expect(rejected.status).toBe(200);
    expect(await answer).toMatchObject({ isError: true, _meta: { 'ets/override': { businessTransactionId: id, status: 'REJECTED' } } });
    expect((await get(`/refusal/${id}`)).body).toMatchObject({ matchedRuleId: 'override-rejected' });
    expect(crm.calls.length).toBe(before);
  });

  it('a held call nobody approves within SVC_MCP_HOLD_SECONDS is refused by expiry when the hold ends', async () => {
    const before = crm.calls.length;
    const result = await heldCall('c-held-3');
    const id = result._meta!['ets/override']!.businessTransactionId as string;
    expect(result).toMatchObject({ isError: true, _meta: { 'ets/override': { status: 'EXPIRED' } } });
    expect((await get(`/overrides/${id}`)).body).toMatchObject({ status: 'EXPIRED' });
    expect((await get(`/refusal/${id}`)).body).toMatchObject({ matchedRuleId: 'override-expired' });
    const late = await request(server.url).post(`/overrides/${id}/approve`).set('authorization', bearer(bob)).send(heldApproval(bob, { businessTransactionId: id, intent: { action: 'mcp-crm:create-invoice' }, signals: { customerId: 'c-held-3', amount: 700 } }));
    expect(late.status).toBe(409);
    expect(crm.calls.length).toBe(before);
  });

  it('an upstream isError result is an executed call whose result is recorded', async () => {
    const result = await call('scripted__fail', {});
    expect(result).toMatchObject({ isError: true, content: [{ type: 'text', text: 'the upstream refused' }] });
    const id = result._meta!['ets/trustRecord']!.businessTransactionId as string;
    expect((await get(`/trust-records/${id}`)).body.executions[0]).toMatchObject({ status: 'SUCCEEDED', result: { isError: true } });
  });

  it('unknown tools are a JSON-RPC -32602; arguments that break the schema are a clear isError result; nothing is decided or stored', async () => {
    const total = async () => (await get('/transactions')).body.total as number;
    const before = await total();
    for (const name of ['crm__nope', 'nobody__lookup', 'lookup', 'scripted__hang', 'everything__get-env']) {
      const e = await client.callTool({ name, arguments: {} }).then(() => undefined, (x: unknown) => x);
      expect(e).toBeInstanceOf(McpError);
      expect(e).toMatchObject({ code: ErrorCode.InvalidParams, message: expect.stringContaining(`Unknown tool: ${name}`) });
    }
    const bad = await call('crm__create_invoice', { customerId: 42 });
    expect(bad).toMatchObject({ isError: true, _meta: { 'ets/error': { code: 'ARGUMENTS_INVALID' } } });
    expect(bad.content[0]!.text).toContain("arguments must have required property 'amount'");
    expect(bad.content[0]!.text).toContain('arguments/customerId must be string');
    const big = await call('scripted__echo', { text: 'x'.repeat(70_000) });
    expect(big).toMatchObject({ isError: true, _meta: { 'ets/error': { code: 'ARGUMENTS_TOO_LARGE' } } });
    expect(await total()).toBe(before);
  });

  it('a stdio upstream from npm (server-everything) is called through the pipeline', async () => {
    const result = await call('everything__get-sum', { a: 2, b: 3 });
    expect(result.content[0]!.text).toContain('5');
    expect(result._meta!['ets/trustRecord']).toBeDefined();
  });

  it("a stdio server's environment holds only what the operator's file says (and the SDK's PATH, HOME, …): none of the service's settings", async () => {
    const result = await call('scripted__env', {});
    const names = result.content[0]!.text!.split(',');
    expect(names).toEqual(expect.arrayContaining(['SCRIPTED_LIST', 'SCRIPTED_LOG', 'PATH']));
    expect(names.filter((n) => n.startsWith('SVC_') || n.startsWith('NODE_') || n.startsWith('ETS_'))).toEqual([]);
  });

  it('the tool list is refreshed when the upstream says it changed', async () => {
    expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('scripted__extra');
    await call('scripted__grow', {});
    expect(await toolNames(client, (names) => names.includes('scripted__extra'))).toContain('scripted__extra');
    expect(await call('scripted__extra', {})).toMatchObject({ content: [{ type: 'text', text: 'no tool extra' }] });
  });

  it('keeps one upstream session per server and reuses it across calls', async () => {
    const sessions = crm.sessions();
    for (let i = 0; i < 3; i++) await call('crm__lookup', { customerId: `c-${i}` });
    expect(crm.sessions()).toBe(sessions);
    expect(sessions).toBe(1);
    expect(readLog(log()).filter((l) => l.started !== undefined)).toHaveLength(1);
  });

  it('a revoked server offers no tools, and its calls are unknown tools', async () => {
    await registerMcpServer(server.url, alice, bob, { name: 'temp', stdio: 'scripted', policyName: 'scripted-tools', tools: ['echo'] });
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('temp__echo');
    await revokeMcpServer(server.url, alice, bob, 'temp');
    expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('temp__echo');
    await expect(client.callTool({ name: 'temp__echo', arguments: { text: 'x' } })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  });
});

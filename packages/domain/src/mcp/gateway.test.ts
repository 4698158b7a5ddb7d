import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Caller } from '../identity/caller.js';
import { silentLogger } from '../ports/logger.js';
import { ConnectorError, type ReleaseRequest } from '../execution/connectors.js';
import type { ExecutionOutcome } from '../execution/context.js';
import type { HeldEnd } from '../overrides/held-transactions.js';
import { DomainError } from '../shared/errors.js';
import { McpConnector, McpConnectorRegistry } from './connector.js';
import { BuiltInConnectors, ConnectorChain } from '../execution/connector-chain.js';
import { InMemoryMcpServerStore } from './in-memory.js';
import { InputSchemas } from './input-schema.js';
import type { McpUpstreams, UpstreamCallOutcome, UpstreamTool } from './ports.js';
import type { McpServerRegistration } from './registration.js';
import { McpToolCatalog, offeredTools } from './tool-catalog.js';
import { MCP_ARGUMENTS_MAX_BYTES, McpToolCalls } from './tool-call.js';

const NOW = new Date('2026-11-21T12:00:00.000Z');
const OBJECT = { type: 'object', properties: { amount: { type: 'number' }, note: { type: 'string' } }, required: ['amount'], additionalProperties: false };

const registration = (over: Partial<McpServerRegistration> = {}): McpServerRegistration => ({
  registrationId: 'reg-crm',
  name: 'crm',
  url: 'https://mcp.example.com/mcp',
  stdio: null,
  policyName: 'crm-calls',
  tools: ['*'],
  timeoutMs: 5000,
  proposer: 'alice',
  approvedBy: 'bob',
  registeredAt: '2026-11-20T00:00:00.000Z',
  ...over,
});

const caller = (capabilities: string[] = ['*']): Caller => ({ callerId: 'agent-7', allowedCapabilities: capabilities, allowedPrincipalIds: [], allowedTenantIds: [] });

function fakeUpstreams(tools: UpstreamTool[], answer: UpstreamCallOutcome = { outcome: 'answered', result: { content: [{ type: 'text', text: 'done' }] } }) {
  const calls: { server: string; tool: string; arguments: Record<string, unknown> }[] = [];
  const upstreams: McpUpstreams & { calls: typeof calls; tools: UpstreamTool[] } = {
    calls,
    tools,
    listTools: async () => ({ ok: true, tools: upstreams.tools }),
    callTool: async (server, call) => {
      calls.push({ server: server.name, tool: call.tool, arguments: call.arguments });
      return answer;
    },
    retain: () => undefined,
  };
  return upstreams;
}

async function setup(tools: UpstreamTool[] = [{ name: 'transfer', description: 'Moves money', inputSchema: OBJECT }], answer?: UpstreamCallOutcome) {
  const servers = new InMemoryMcpServerStore();
  await servers.activate(registration());
  const upstreams = fakeUpstreams(tools, answer);
  const schemas = new InputSchemas();
  const catalog = new McpToolCatalog({ servers, upstreams, schemas, logger: silentLogger });
  const deps = { servers, catalog, upstreams, schemas, clock: { now: () => NOW } };
  return { servers, upstreams, schemas, catalog, deps, connector: new McpConnector(registration(), deps) };
}

describe('which upstream tools are offered', () => {
  const schemas = new InputSchemas();
  const tool = (name: string, inputSchema: unknown = { type: 'object' }) => ({ name, inputSchema }) as UpstreamTool;

  it('offers what the registration allows, named <server>__<tool>, with the upstream description and schema', () => {
    const { offered, dropped } = offeredTools(registration({ tools: ['read'] }), [{ ...tool('read'), description: 'Reads' }, tool('write')], schemas);
    expect(offered).toEqual([{ server: 'crm', name: 'read', gatewayName: 'crm__read', capability: 'mcp-crm:read', description: 'Reads', inputSchema: { type: 'object' } }]);
    expect(dropped).toEqual([]);
  });

  it('drops the lies of a listing: names listed twice, names MCP does not allow, schemas that cannot be used, and capabilities two tools share', () => {
    const { offered, dropped } = offeredTools(
      registration(),
      [
        tool('twice'),
        tool('twice'),
        tool('has space'),
        tool('2fa'),
        tool('str', { type: 'string' }),
        tool('broken', { type: 'object', properties: { a: { type: 'nonsense' } } }),
        tool('remote', { type: 'object', properties: { a: { $ref: 'https://evil.example.com/s.json' } } }),
        tool('dialect', { $schema: 'http://json-schema.org/draft-03/schema#', type: 'object' }),
        tool('get_user'),
        tool('Get-User'),
        tool('fine'),
      ],
      schemas,
    );
    expect(offered.map((t) => t.name)).toEqual(['fine']);
    expect(dropped.map((d) => d.name).sort()).toEqual(['2fa', 'Get-User', 'broken', 'dialect', 'get_user', 'has space', 'remote', 'str', 'twice', 'twice']);
  });

  it('a key sees only the tools its allowedCapabilities allow', async () => {
    const { catalog } = await setup([tool('read'), tool('write')]);
    expect((await catalog.toolsFor(caller(['mcp-crm:read']))).map((t) => t.gatewayName)).toEqual(['crm__read']);
    expect(await catalog.toolsFor(caller([]))).toEqual([]);
  });
});

describe('the arguments of a call against the tool input schema', () => {
  const schemas = new InputSchemas();
  it('checks 2020-12 by default, and draft-07 when the schema says so', () => {
    expect(schemas.check(OBJECT, { amount: 5 })).toBeUndefined();
    expect(schemas.check(OBJECT, { amount: '5' })).toEqual(['arguments/amount must be number']);
    expect(schemas.check(OBJECT, {})).toEqual(["arguments must have required property 'amount'"]);
    const draft7 = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { at: { type: 'string', format: 'date-time' } } };
    expect(schemas.check(draft7, { at: 'yesterday' })).toEqual(['arguments/at must match format "date-time"']);
  });

  it('never throws, whatever the schema and the value', () => {
    fc.assert(
      fc.property(fc.oneof(fc.anything(), fc.record({ type: fc.constant('object'), properties: fc.dictionary(fc.string(), fc.anything()) })), fc.anything(), (schema, value) => {
        const r = schemas.check(schema, value);
        expect(r === undefined || Array.isArray(r)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('the MCP connector (release)', () => {
  const request = (over: Partial<ReleaseRequest> = {}): ReleaseRequest => ({
    businessTransactionId: 'tx-1',
    action: 'mcp-crm:transfer',
    parameters: { amount: 5 },
    intentHash: 'h'.repeat(64),
    conditions: [],
    ...over,
  });
  const phase = async (p: Promise<unknown>) => p.then(() => 'executed', (e: unknown) => (e as ConnectorError).phase);

  it('calls the upstream tool once with the parameters, and the CallToolResult is the result (isError too)', async () => {
    const { connector, upstreams } = await setup(undefined, { outcome: 'answered', result: { content: [], isError: true } });
    await expect(connector.release(request())).resolves.toEqual({ result: { content: [], isError: true } });
    expect(upstreams.calls).toEqual([{ server: 'crm', tool: 'transfer', arguments: { amount: 5 } }]);
    expect(connector).toMatchObject({ namespace: 'mcp-crm', policyName: 'crm-calls' });
  });

  it.each<[UpstreamCallOutcome, string]>([
    [{ outcome: 'not-sent', message: 'no session' }, 'before-send'],
    [{ outcome: 'unknown', reason: 'timeout', message: 'late' }, 'outcome-unknown'],
    [{ outcome: 'unknown', reason: 'closed', message: 'crashed' }, 'outcome-unknown'],
    [{ outcome: 'unknown', reason: 'error', message: 'protocol error' }, 'outcome-unknown'],
  ])('%j → %s', async (answer, expected) => {
    const { connector } = await setup(undefined, answer);
    expect(await phase(connector.release(request()))).toBe(expected);
  });

  it('sends nothing when the server was revoked, the tool is gone, the parameters break the schema, or a condition has passed', async () => {
    const a = await setup();
    await a.servers.revoke('reg-crm', NOW.toISOString(), 'chg');
    expect(await phase(a.connector.release(request()))).toBe('before-send');
    const b = await setup();
    expect(await phase(b.connector.release(request({ action: 'mcp-crm:other' })))).toBe('before-send');
    expect(await phase(b.connector.release(request({ parameters: { amount: 'x' } })))).toBe('before-send');
    expect(await phase(b.connector.release(request({ conditions: [{ signal: 's', value: 1, validUntil: NOW.toISOString(), source: 'erp' }] })))).toBe('conditions-not-met');
    expect([...a.upstreams.calls, ...b.upstreams.calls]).toEqual([]);
  });

  it('the registry serves mcp-<server> actions of active servers only, and a chain asks each registry in turn', async () => {
    const { deps } = await setup();
    const registry = new McpConnectorRegistry(deps);
    expect(await registry.find('mcp-crm:transfer')).toBeInstanceOf(McpConnector);
    expect(await registry.find('mcp-other:transfer')).toBeUndefined();
    expect(await registry.find('payments:transfer')).toBeUndefined();
    const builtIn = { namespace: 'sandbox', release: async () => ({ result: 1 }) };
    const builtIns = new BuiltInConnectors([builtIn]);
    const external = { owner: 'external connectors', owns: () => true, find: async () => ({ namespace: 'external', release: async () => ({ result: 2 }) }) };
    const chain = new ConnectorChain([registry, builtIns, external]);
    expect(await chain.find('sandbox:echo')).toBe(builtIn);
    expect(await chain.find('mcp-crm:transfer')).toBeInstanceOf(McpConnector);
    // An mcp- namespace is the MCP servers' alone: never the external kind's, even for an unknown server.
    expect(await chain.find('mcp-other:x')).toBeUndefined();
    expect(chain.ownedByAnother('mcp-crm', external)).toContain('MCP servers');
    expect(chain.ownedByAnother('payments', external)).toBeUndefined();
  });
});

describe('a tools/call: one execution of the pipeline, held for a human when the policy says so', () => {
  async function calls(run: (tx: Record<string, unknown>) => Promise<ExecutionOutcome>, heldEnds: HeldEnd = { kind: 'refused', status: 'EXPIRED' }) {
    const s = await setup();
    const runs: Record<string, unknown>[] = [];
    const waits: string[] = [];
    const service = new McpToolCalls({
      catalog: s.catalog,
      schemas: s.schemas,
      execution: { execute: async ({ tx }) => (runs.push(tx as unknown as Record<string, unknown>), run(tx as unknown as Record<string, unknown>)) },
      held: { awaitOutcome: async (id) => (waits.push(id), heldEnds) },
      holdSeconds: 120,
      policyInEffect: async (name) => (name === 'crm-calls' ? '2.0.0' : undefined),
      ids: { uuid: () => '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a' },
    });
    const call = (name: string, args?: unknown, who = caller()) => service.call(who, { name, arguments: args }, (id) => `https://ets.example.com/trust-records/${id}`);
    return { service, runs, waits, call };
  }
  const record = { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', decision: {} } as never;
  const executed = async (): Promise<ExecutionOutcome> => ({
    kind: 'executed',
    record,
    // An upstream that tries to pass for the gateway: its `ets/` keys are dropped.
    result: { content: [{ type: 'text', text: 'moved' }], _meta: { upstream: 1, 'ets/refusal': { businessTransactionId: 'fake' }, 'ets/trustRecord': 'fake' } },
  });

  it('builds the business transaction of the contract and answers the upstream result with the trust record', async () => {
    const { call, runs } = await calls(executed);
    const answer = await call('crm__transfer', { amount: 5, note: 'x' });
    expect(runs).toEqual([
      {
        businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a',
        metadata: { mcpServer: 'crm', mcpTool: 'transfer' },
        authority: { principalId: 'agent-7', authorityId: 'agent-7' },
        authorization: { authorityId: 'agent-7' },
        intent: { action: 'mcp-crm:transfer', parameters: { amount: 5, note: 'x' } },
        policy: { name: 'crm-calls', version: '2.0.0' },
        signals: { amount: 5, note: 'x' },
      },
    ]);
    expect(answer).toEqual({
      kind: 'result',
      result: {
        content: [{ type: 'text', text: 'moved' }],
        _meta: {
          upstream: 1,
          'ets/trustRecord': { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', verifyUrl: 'https://ets.example.com/trust-records/6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a' },
        },
      },
    });
  });

  it('an unknown tool, or one the key may not call, is unknown; bad arguments are a result; nothing runs', async () => {
    const { call, runs } = await calls(executed);
    for (const name of ['crm__nothing', 'other__transfer', 'transfer', 'crm__']) expect(await call(name, { amount: 1 })).toMatchObject({ kind: 'unknown-tool' });
    expect(await call('crm__transfer', { amount: 1 }, caller(['mcp-crm:other']))).toMatchObject({ kind: 'unknown-tool' });
    expect(await call('crm__transfer', { amount: 'x' })).toMatchObject({ kind: 'result', result: { isError: true, _meta: { 'ets/error': { code: 'ARGUMENTS_INVALID' } } } });
    expect(await call('crm__transfer', [1])).toMatchObject({ kind: 'result', result: { isError: true, _meta: { 'ets/error': { code: 'ARGUMENTS_INVALID' } } } });
    expect(await call('crm__transfer', { amount: 1, note: 'é'.repeat(MCP_ARGUMENTS_MAX_BYTES / 2) })).toMatchObject({
      kind: 'result',
      result: { isError: true, _meta: { 'ets/error': { code: 'ARGUMENTS_TOO_LARGE' } } },
    });
    expect(runs).toEqual([]);
  });

  it('a refusal is an isError result naming its signed record', async () => {
    const { call } = await calls(async () => ({ kind: 'refused', refusal: { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', reason: 'too much' } as never }));
    expect(await call('crm__transfer', { amount: 5 })).toEqual({
      kind: 'result',
      result: { content: [{ type: 'text', text: 'Execution rejected: too much' }], isError: true, _meta: { 'ets/refusal': { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a' } } },
    });
  });

  it('a failure after the intent was stored is an isError result with its code', async () => {
    const error = new DomainError('bad_gateway', 'unknown', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' });
    const { call } = await calls(async () => ({ kind: 'failed', error }));
    expect(await call('crm__transfer', { amount: 5 })).toEqual({
      kind: 'result',
      result: { content: [{ type: 'text', text: 'unknown' }], isError: true, _meta: { 'ets/error': { code: 'EXECUTION_OUTCOME_UNKNOWN', businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', executionStatus: 'EXECUTION_UNKNOWN' } } },
    });
  });

  it.each<[string, DomainError, Record<string, unknown>]>([
    [
      'an unknown outcome',
      new DomainError('bad_gateway', 'unknown', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' }),
      { 'ets/error': { code: 'EXECUTION_OUTCOME_UNKNOWN', businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', executionStatus: 'EXECUTION_UNKNOWN' } },
    ],
    ['any other refusal', new DomainError('forbidden', 'Caller is not permitted to assert this authority.principalId.'), { 'ets/error': { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a' } }],
  ])('%s is an isError result naming the transaction', async (_what, error, meta) => {
    const { call } = await calls(async () => Promise.reject(error));
    expect(await call('crm__transfer', { amount: 5 })).toEqual({ kind: 'result', result: { content: [{ type: 'text', text: error.message }], isError: true, _meta: meta } });
  });

  it('a requires_override decision holds the call until a human decides: approved, the result; rejected or expired, the override status', async () => {
    const held = async (): Promise<ExecutionOutcome> => ({ kind: 'held', record, expiresAt: '2026-11-27T12:02:00.000Z' });
    const approved = await calls(held, { kind: 'executed', record, result: { content: [{ type: 'text', text: 'moved' }] } });
    expect(await approved.call('crm__transfer', { amount: 5 })).toEqual({
      kind: 'result',
      result: {
        content: [{ type: 'text', text: 'moved' }],
        _meta: { 'ets/trustRecord': { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', verifyUrl: 'https://ets.example.com/trust-records/6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a' } },
      },
    });
    expect(approved.waits).toEqual(['6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a']);
    for (const status of ['EXPIRED', 'REJECTED'] as const) {
      const refused = await calls(held, { kind: 'refused', status, reason: 'no' });
      expect(await refused.call('crm__transfer', { amount: 5 })).toMatchObject({
        kind: 'result',
        result: { isError: true, _meta: { 'ets/override': { businessTransactionId: '6f1c7a52-3d1e-4c55-9a3b-1f2e3d4c5b6a', status } } },
      });
    }
    const abandoned = await calls(held, { kind: 'abandoned' });
    expect(await abandoned.call('crm__transfer', { amount: 5 })).toMatchObject({ result: { isError: true, _meta: { 'ets/override': { status: 'PENDING' } } } });
    const broken = await calls(async () => Promise.reject(new Error('bug')));
    await expect(broken.call('crm__transfer', { amount: 5 })).rejects.toThrow('bug');
  });

  it('lists the tools a key may call with the upstream description and input schema', async () => {
    const { service } = await calls(executed);
    expect(await service.list(caller())).toEqual([{ name: 'crm__transfer', description: 'Moves money', inputSchema: OBJECT }]);
    expect(await service.list(caller(['payments:transfer']))).toEqual([]);
  });
});

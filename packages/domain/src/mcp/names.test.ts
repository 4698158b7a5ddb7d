import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { isCapability } from '../shared/names.js';
import { readProposal } from '../external-connectors/registration.js';
import { DomainError } from '../shared/errors.js';
import { gatewayToolName, serverNameProblem, serverOfAction, splitGatewayToolName, toolAction, toolCapability } from './names.js';
import { readMcpServerProposal } from './registration.js';

describe('MCP names (CONTRACT "MCP gateway")', () => {
  it('maps a tool to mcp-<server>:<tool lower-cased, every character outside [a-z0-9] turned into ->', () => {
    expect(toolAction('crm', 'Get_User.v2')).toBe('mcp-crm:get-user-v2');
    expect(toolCapability('crm', 'Get_User.v2')).toBe('mcp-crm:get-user-v2');
    expect(toolCapability('files', 'read')).toBe('mcp-files:read');
  });

  it.each([
    ['2fa', 'a verb starting with a digit'],
    ['get__user', 'two hyphens in a row'],
    ['get_', 'a trailing hyphen'],
    ['-x', 'a leading hyphen'],
    ['a'.repeat(128), 'longer than 128 characters'],
  ])('a tool named %j gives no valid capability (%s): it is not offered', (tool) => {
    expect(toolCapability('crm', tool)).toBeUndefined();
  });

  it('every capability it gives is a valid one, and every tool name round-trips through the gateway name', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9]{0,10}$/), fc.stringMatching(/^[A-Za-z0-9_.-]{1,40}$/), (server, tool) => {
        const capability = toolCapability(server, tool);
        if (capability !== undefined) expect(isCapability(capability)).toBe(true);
        expect(splitGatewayToolName(gatewayToolName(server, tool))).toEqual({ server, tool });
        expect(serverOfAction(toolAction(server, tool))).toBe(server);
      }),
      { numRuns: 500 },
    );
  });

  it('splits at the first "__" (a server name holds no "_"), and refuses names that name no server', () => {
    expect(splitGatewayToolName('crm__get__user')).toEqual({ server: 'crm', tool: 'get__user' });
    for (const bad of ['crm', '__x', 'crm__', 'Crm__x', '1crm__x', 'a_b__x']) expect(splitGatewayToolName(bad)).toBeUndefined();
  });

  it('a server name must keep the contract pattern and make a capability namespace', () => {
    expect(serverNameProblem('crm-eu')).toBeUndefined();
    for (const bad of ['Crm', '1crm', 'crm_eu', 'a'.repeat(41), '', 'crm--eu', 'crm-', 42]) expect(serverNameProblem(bad)).toBeDefined();
    expect(serverOfAction('payments:transfer')).toBeUndefined();
  });

  it('external connectors may never take a capability in an mcp- namespace', () => {
    const body = { kind: 'register', capability: 'mcp-crm:get-user', endpoint: 'https://x.example.com/', policyName: 'p', forwardedParameters: [] };
    const owner = (ns: string) => (ns.startsWith('mcp-') ? 'MCP servers (mcp-*: POST /mcp-servers/changes)' : undefined);
    expect(() => readProposal(body, owner)).toThrow("capability must not be in the namespace 'mcp-crm': it is reserved (MCP servers");
    expect(() => readProposal({ kind: 'revoke', capability: 'mcp-anything:x' }, owner)).toThrow(DomainError);
  });
});

describe('MCP server proposals', () => {
  const stdio = ['everything'];
  const register = { kind: 'register', name: 'crm', url: 'https://MCP.Example.com:8443/mcp', policyName: 'crm-calls', tools: ['*'] };

  it('reads a register proposal with its defaults (url normalised, timeout 10000), a stdio one and a revoke', () => {
    expect(readMcpServerProposal(register, stdio)).toEqual({
      kind: 'register',
      payload: { name: 'crm', url: 'https://mcp.example.com:8443/mcp', stdio: null, policyName: 'crm-calls', tools: ['*'], timeoutMs: 10000 },
    });
    expect(readMcpServerProposal({ kind: 'register', name: 'ev', stdio: 'everything', policyName: 'p', tools: ['echo', 'add'], timeoutMs: 2000 }, stdio)).toEqual({
      kind: 'register',
      payload: { name: 'ev', url: null, stdio: 'everything', policyName: 'p', tools: ['echo', 'add'], timeoutMs: 2000 },
    });
    expect(readMcpServerProposal({ kind: 'revoke', name: 'crm', reason: 'done' }, stdio)).toEqual({ kind: 'revoke', name: 'crm' });
  });

  it.each<[string, Record<string, unknown>]>([
    ['name', { name: 'CRM' }],
    ['name', { name: 'crm--eu' }],
    ['url or stdio', { url: undefined }],
    ['url or stdio', { stdio: 'everything' }],
    ['url', { url: 'http://mcp.example.com/' }],
    ['url', { url: 'https://127.0.0.1/mcp' }],
    ['url', { url: 'https://mcp.example.com:0/' }],
    ['url', { url: 'https://localhost/mcp' }],
    ['stdio', { url: undefined, stdio: 'rm -rf /' }],
    ['stdio', { url: undefined, stdio: 'unknown' }],
    ['policyName', { policyName: 'Crm Calls' }],
    ['tools', { tools: undefined }],
    ['tools', { tools: [] }],
    ['tools', { tools: ['*', 'echo'] }],
    ['tools', { tools: ['echo', 'echo'] }],
    ['tools', { tools: ['bad name'] }],
    ['tools', { tools: 'echo' }],
    ['timeoutMs', { timeoutMs: 999 }],
    ['timeoutMs', { timeoutMs: 30001 }],
    ['command', { command: 'node server.js' }],
  ])('a proposal breaking %s is a 400 naming it', (field, over) => {
    const body: Record<string, unknown> = { ...register, ...over };
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    expect(() => readMcpServerProposal(body, stdio)).toThrow(field);
  });

  it('answers arbitrary input with a proposal or a 400, never anything else', () => {
    const field = fc.oneof(fc.anything(), fc.string(), fc.constantFrom('register', 'revoke', 'crm', 'everything', '*', 'https://mcp.example.com/'));
    const body = fc.oneof(
      fc.anything(),
      fc.record({ kind: field, name: field, url: field, stdio: field, policyName: field, tools: fc.oneof(field, fc.array(field)), timeoutMs: fc.oneof(field, fc.integer()) }, { requiredKeys: [] }),
    );
    fc.assert(
      fc.property(body, (b) => {
        try {
          readMcpServerProposal(b, stdio);
        } catch (e) {
          expect(e).toBeInstanceOf(DomainError);
          expect((e as DomainError).kind).toBe('invalid');
        }
      }),
      { numRuns: 1000 },
    );
  });
});

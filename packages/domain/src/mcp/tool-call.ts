/**
 * The gateway's use case (CONTRACT "MCP gateway"): what an agent sees in `tools/list`, and what a
 * `tools/call` becomes. A call is checked first (the tool exists and the key may call it, the
 * arguments are not too large and keep the tool's input schema), with nothing decided, signed or
 * stored when it fails; then it is a Business Transaction through the whole execution pipeline,
 * whose outcome is answered as a `CallToolResult`:
 * - executed: the upstream's result, with `_meta["ets/trustRecord"] = { businessTransactionId, verifyUrl }`;
 * - refused (POLICY_DENIED): `isError`, the reason, `_meta["ets/refusal"] = { businessTransactionId }`;
 * - unknown outcome: `isError`, `_meta["ets/error"].code` EXECUTION_OUTCOME_UNKNOWN (never retried);
 * - a `requires_override` decision: `isError`, `_meta["ets/override"] = { businessTransactionId, status: "PENDING" }`
 *   (phase 1: the call is not held; the held transaction is recorded for a human);
 * - any other refusal of the pipeline: `isError`, its message, `_meta["ets/error"] = { code?, businessTransactionId }`.
 *
 * This module is the one place that knows both the MCP shapes and the pipeline's outcomes: the
 * pipeline's entry point is `execution.run` below.
 */
import { DomainError } from '../shared/errors.js';
import { isPlainObject } from '../shared/guards.js';
import { mayRequestCapability, type Caller } from '../identity/caller.js';
import type { IdGenerator } from '../ports/clock.js';
import type { ExecutionService } from '../execution/execution-service.js';
import type { ExecutionOutcome } from '../execution/pipeline.js';
import type { InputSchemas } from './input-schema.js';
import { splitGatewayToolName } from './names.js';
import type { CallToolResult } from './ports.js';
import type { McpToolCatalog } from './tool-catalog.js';

/** The largest arguments of a call (their JSON, in UTF-8 bytes): they are signed and stored as the intent's parameters. */
export const MCP_ARGUMENTS_MAX_BYTES = 64 * 1024;

export const TRUST_RECORD_META = 'ets/trustRecord';
export const REFUSAL_META = 'ets/refusal';
export const OVERRIDE_META = 'ets/override';
export const ERROR_META = 'ets/error';

/** A tool as `tools/list` shows it. */
export interface GatewayTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/**
 * An unknown tool (or one the key may not call, which the caller cannot tell apart) is an error of
 * the protocol (MCP: JSON-RPC -32602); everything else is a result.
 */
export type McpToolCallAnswer = { kind: 'unknown-tool'; message: string } | { kind: 'result'; result: CallToolResult };

export interface McpToolCallsDeps {
  catalog: Pick<McpToolCatalog, 'toolsFor' | 'find'>;
  schemas: Pick<InputSchemas, 'check'>;
  execution: Pick<ExecutionService, 'run'>;
  /** The version in effect of a policy name (the latest approved one). */
  policyInEffect(name: string): Promise<string | undefined>;
  ids: IdGenerator;
}

export class McpToolCalls {
  constructor(private readonly deps: McpToolCallsDeps) {}

  /** `tools/list`: the tools of every active server that the key may call. */
  async list(caller: Caller): Promise<GatewayTool[]> {
    return (await this.deps.catalog.toolsFor(caller)).map((t) => ({
      name: t.gatewayName,
      ...(t.description !== undefined ? { description: t.description } : {}),
      inputSchema: t.inputSchema,
    }));
  }

  /**
   * `tools/call`. `recordUrl(id)`: where the Trust Record of a transaction is read (the `verifyUrl`).
   * Throws only what is not the caller's to fix (a DomainError of kind `internal`, or anything else).
   */
  async call(caller: Caller, request: { name: string; arguments?: unknown }, recordUrl: (businessTransactionId: string) => string): Promise<McpToolCallAnswer> {
    const unknown: McpToolCallAnswer = { kind: 'unknown-tool', message: `Unknown tool: ${String(request.name).slice(0, 200)}` };
    const named = splitGatewayToolName(request.name);
    if (!named) return unknown;
    const found = await this.deps.catalog.find(named.server, named.tool);
    // A tool the key may not call is unknown to it, as in `tools/list`.
    if (!found || !mayRequestCapability(caller, found.tool.capability)) return unknown;
    const { registration, tool } = found;

    const args = request.arguments ?? {};
    if (!isPlainObject(args)) return invalidArguments('ARGUMENTS_INVALID', 'The arguments must be a JSON object.');
    const size = utf8Length(JSON.stringify(args));
    if (size > MCP_ARGUMENTS_MAX_BYTES) return invalidArguments('ARGUMENTS_TOO_LARGE', `The arguments are too large: ${size} bytes of JSON, at most ${MCP_ARGUMENTS_MAX_BYTES}.`);
    const problems = this.deps.schemas.check(tool.inputSchema, args);
    if (problems) return invalidArguments('ARGUMENTS_INVALID', `The arguments do not match the input schema of ${tool.gatewayName}: ${problems.join('; ')}.`);

    const version = await this.deps.policyInEffect(registration.policyName);
    if (version === undefined) {
      return errorResult(`No version of policy '${registration.policyName}', which decides the calls of ${registration.name}, is in effect; nothing was executed.`, {});
    }
    const businessTransactionId = this.deps.ids.uuid();
    const transaction = {
      businessTransactionId,
      // Which upstream tool was called: the capability's verb is a lossy form of its name.
      metadata: { mcpServer: registration.name, mcpTool: tool.name },
      authority: { principalId: caller.callerId, authorityId: caller.callerId },
      authorization: { authorityId: caller.callerId },
      intent: { action: tool.capability, parameters: args },
      policy: { name: registration.policyName, version },
      signals: { ...args },
    };
    let outcome: ExecutionOutcome;
    try {
      outcome = await this.deps.execution.run(caller, transaction, 'release');
    } catch (e) {
      if (!(e instanceof DomainError) || e.kind === 'internal') throw e;
      return { kind: 'result', result: refusalOf(e, businessTransactionId) };
    }
    return { kind: 'result', result: resultOf(outcome, businessTransactionId, recordUrl) };
  }
}

function resultOf(outcome: ExecutionOutcome, businessTransactionId: string, recordUrl: (id: string) => string): CallToolResult {
  if (outcome.kind === 'executed') {
    const upstream: CallToolResult = isPlainObject(outcome.result) ? (outcome.result as CallToolResult) : { content: [{ type: 'text', text: JSON.stringify(outcome.result) }] };
    // The `ets/` keys are the gateway's: an upstream cannot make its result look refused, held or recorded otherwise.
    const meta = Object.fromEntries(Object.entries(isPlainObject(upstream._meta) ? upstream._meta : {}).filter(([k]) => !k.startsWith('ets/')));
    return { ...upstream, _meta: { ...meta, [TRUST_RECORD_META]: { businessTransactionId, verifyUrl: recordUrl(businessTransactionId) } } };
  }
  // `recorded` is `POST /transactions`' outcome, never a release's; `pending-override` waits for a human.
  return {
    content: [text(`Held for a human approval: the policy requires an override for this call (business transaction ${businessTransactionId}); it was not executed.`)],
    isError: true,
    _meta: { [OVERRIDE_META]: { businessTransactionId, status: 'PENDING' } },
  };
}

function refusalOf(e: DomainError, businessTransactionId: string): CallToolResult {
  if (e.code === 'POLICY_DENIED') return { content: [text(e.message)], isError: true, _meta: { [REFUSAL_META]: { businessTransactionId } } };
  return errorResult(e.message, { ...(e.code ? { code: e.code } : {}), businessTransactionId, ...(e.extra ?? {}) }).result;
}

const text = (t: string) => ({ type: 'text' as const, text: t });

function errorResult(message: string, meta: Record<string, unknown>): { kind: 'result'; result: CallToolResult } {
  return { kind: 'result', result: { content: [text(message)], isError: true, _meta: { [ERROR_META]: meta } } };
}

/** A tool execution error the model can correct (MCP 2025-11-25: input validation is a result, not a protocol error). */
const invalidArguments = (code: 'ARGUMENTS_INVALID' | 'ARGUMENTS_TOO_LARGE', message: string) => errorResult(message, { code });

/** Bytes of the UTF-8 form of a well-formed string. */
function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

/**
 * The gateway's use case (CONTRACT "MCP gateway"): what an agent sees in `tools/list`, and what a
 * `tools/call` becomes. A call is checked first (the tool exists and the key may call it, the
 * arguments are not too large and keep the tool's input schema), with nothing decided, signed or
 * stored when it fails; then it is a Business Transaction through the whole execution pipeline,
 * whose outcome is answered as a `CallToolResult`:
 * - executed: the upstream's result, with `_meta["ets/trustRecord"] = { businessTransactionId, verifyUrl }`;
 * - refused (POLICY_DENIED): `isError`, the reason, `_meta["ets/refusal"] = { businessTransactionId }`;
 * - unknown outcome: `isError`, `_meta["ets/error"].code` EXECUTION_OUTCOME_UNKNOWN (never retried);
 * - a `requires_override` decision: the call is held (a held transaction) for at most
 *   `holdSeconds` (SVC_MCP_HOLD_SECONDS), with progress while it waits; approved within it, the
 *   upstream's result as above; otherwise (rejected, or refused by expiry when the hold ends)
 *   `isError` with `_meta["ets/override"] = { businessTransactionId, status }`;
 * - a failure after the intent was stored, and any other refusal of the pipeline: `isError`, its
 *   message, `_meta["ets/error"] = { code?, businessTransactionId, executionStatus? }`.
 *
 * This module is the one place that knows both the MCP shapes and the pipeline's outcomes: a call
 * is one `execution.execute` with a built Business Transaction, as `POST /execute` is.
 */
import { DomainError } from '../shared/errors.js';
import { isPlainObject } from '../shared/guards.js';
import { mayRequestCapability, type Caller } from '../identity/caller.js';
import type { IdGenerator } from '../ports/clock.js';
import type { ExecutionService } from '../execution/execution-service.js';
import type { ExecutionOutcome } from '../execution/context.js';
import type { BusinessTransaction } from '../execution/records.js';
import type { PendingAuthEvent } from '../identity/auth-audit.js';
import type { HeldEnd, HeldTransactions } from '../overrides/held-transactions.js';
import type { HeldTransaction } from '../execution/held.js';
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
  execution: Pick<ExecutionService, 'execute'>;
  /** Where a held call waits for a human. */
  held: Pick<HeldTransactions, 'awaitOutcome'>;
  /** How long a held call waits for a human (SVC_MCP_HOLD_SECONDS). */
  holdSeconds: number;
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
  async call(
    caller: Caller,
    request: { name: string; arguments?: unknown },
    recordUrl: (businessTransactionId: string) => string,
    options: CallOptions = {},
  ): Promise<McpToolCallAnswer> {
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
    const transaction: BusinessTransaction = {
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
      outcome = await this.deps.execution.execute({ caller, tx: transaction, audit: options.audit, holdSeconds: this.deps.holdSeconds });
    } catch (e) {
      if (!(e instanceof DomainError) || e.kind === 'internal') throw e;
      return { kind: 'result', result: errorOf(e, businessTransactionId) };
    }
    if (outcome.kind === 'held') {
      const ended = await this.deps.held.awaitOutcome(businessTransactionId, { signal: options.signal, onWaiting: options.onWaiting });
      return { kind: 'result', result: heldResultOf(ended, businessTransactionId, recordUrl) };
    }
    return { kind: 'result', result: resultOf(outcome, businessTransactionId, recordUrl) };
  }
}

export interface CallOptions {
  /** The request's signed authentication event, for the pipeline's first commit to carry. */
  audit?: PendingAuthEvent;
  /** The caller went away: a held call stops waiting (the transaction stays held until it is decided or expires). */
  signal?: AbortSignal;
  /** Runs at every look while a held call waits for a human (progress for the caller). */
  onWaiting?: (held: HeldTransaction) => Promise<void>;
}

function resultOf(outcome: Exclude<ExecutionOutcome, { kind: 'held' }>, businessTransactionId: string, recordUrl: (id: string) => string): CallToolResult {
  switch (outcome.kind) {
    case 'executed':
      return executedResult(outcome.result, businessTransactionId, recordUrl);
    case 'refused':
      return { content: [text(`Execution rejected: ${outcome.refusal.reason}`)], isError: true, _meta: { [REFUSAL_META]: { businessTransactionId } } };
    case 'failed':
      return errorOf(outcome.error, businessTransactionId);
    case 'recorded':
      // `POST /transactions`' outcome, never a release's.
      throw new DomainError('internal', 'A tool call was recorded without release.');
  }
}

function heldResultOf(ended: HeldEnd, businessTransactionId: string, recordUrl: (id: string) => string): CallToolResult {
  switch (ended.kind) {
    case 'executed':
      return executedResult(ended.result, businessTransactionId, recordUrl);
    case 'failed':
      return errorOf(ended.error, businessTransactionId);
    case 'refused':
      return {
        content: [text(ended.status === 'REJECTED' ? `Rejected by a human: ${ended.reason ?? 'no reason given'}. Nothing was executed.` : `No human approved this call in time; it was refused by expiry. Nothing was executed.`)],
        isError: true,
        _meta: { [OVERRIDE_META]: { businessTransactionId, status: ended.status } },
      };
    case 'abandoned':
      return {
        content: [text(`Held for a human approval (business transaction ${businessTransactionId}); nothing has been executed yet.`)],
        isError: true,
        _meta: { [OVERRIDE_META]: { businessTransactionId, status: 'PENDING' } },
      };
  }
}

/** The upstream's own result, with where its Trust Record is. */
function executedResult(result: unknown, businessTransactionId: string, recordUrl: (id: string) => string): CallToolResult {
  const upstream: CallToolResult = isPlainObject(result) ? (result as CallToolResult) : { content: [{ type: 'text', text: JSON.stringify(result) }] };
  // The `ets/` keys are the gateway's: an upstream cannot make its result look refused, held or recorded otherwise.
  const meta = Object.fromEntries(Object.entries(isPlainObject(upstream._meta) ? upstream._meta : {}).filter(([k]) => !k.startsWith('ets/')));
  return { ...upstream, _meta: { ...meta, [TRUST_RECORD_META]: { businessTransactionId, verifyUrl: recordUrl(businessTransactionId) } } };
}

/** A refusal or failure of the pipeline other than a policy's: its message and code. */
function errorOf(e: DomainError, businessTransactionId: string): CallToolResult {
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

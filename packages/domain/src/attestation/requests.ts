/**
 * Request bodies of profile A (spec 4.2). Malformed input is 400 without a code (spec 2.1), naming
 * the field; the checks run in the order of the spec's field lists.
 */
import { invalid } from '../shared/errors.js';
import { isPlainObject } from '../shared/guards.js';
import { parseRfc3339 } from '../shared/rfc3339.js';
import { hasSignalType, type PolicyDocument } from '../policy/index.js';
import { POLICY_VERSION_MAX_LENGTH } from '../policy/schema.js';
import type { AttestationVariant } from './records.js';

export const MAX_ID_LENGTH = 256;
/** Default of `timeWindowSeconds` in `POST /confirm-execution`: five minutes. */
export const DEFAULT_CONFIRMATION_WINDOW_SECONDS = 300;
/** Largest `timeWindowSeconds`: one year. */
export const MAX_CONFIRMATION_WINDOW_SECONDS = 31_536_000;

type Body = Record<string, unknown>;

export function requireObject(body: unknown, what: string): Body {
  if (!isPlainObject(body)) throw invalid(`Request body must be a JSON object (${what}).`);
  return body;
}

/** A non-empty string of at most `max` characters without U+0000 (CONTRACT "Requests"). */
export function requiredString(body: Body, name: string, max = MAX_ID_LENGTH, path = name): string {
  const v = body[name];
  if (typeof v !== 'string' || v === '') throw invalid(`${path} is required and must be a non-empty string.`);
  if (v.length > max) throw invalid(`${path} must be at most ${max} characters.`);
  if (v.includes('\u0000')) throw invalid(`${path} must not contain U+0000.`);
  return v;
}

export interface PolicyRequest {
  policyId: string;
  policyVersion: string;
  signals: Record<string, unknown>;
}

export interface ExecuteRequest extends PolicyRequest {
  /** The caller's `executionId` (attestation variant); absent in the simple variant. */
  requestId?: string;
}

function policyRequest(b: Body): PolicyRequest {
  const policyId = requiredString(b, 'policyId', 128);
  const policyVersion = requiredString(b, 'policyVersion', POLICY_VERSION_MAX_LENGTH);
  if (!isPlainObject(b.signals)) throw invalid('signals is required and must be an object.');
  return { policyId, policyVersion, signals: b.signals };
}

/** `POST /evaluate`, `POST /simulate`: `{policyId, policyVersion, signals}`. */
export const parsePolicyRequest = (body: unknown): PolicyRequest => policyRequest(requireObject(body, '{policyId, policyVersion, signals}'));

/** `POST /execute`: `executionId` is required in the attestation variant and refused in the simple one. */
export function parseExecuteRequest(body: unknown, variant: AttestationVariant): ExecuteRequest {
  if (variant === 'attestation-simple') {
    const b = requireObject(body, '{policyId, policyVersion, signals}');
    if (b.executionId !== undefined) throw invalid('executionId is assigned by the service in this profile; send only policyId, policyVersion and signals.');
    return policyRequest(b);
  }
  const b = requireObject(body, '{executionId, policyId, policyVersion, signals}');
  const requestId = requiredString(b, 'executionId');
  return { requestId, ...policyRequest(b) };
}

/**
 * In profile A signals must match the policy's `signalsSchema`: every signal sent is declared and
 * has the declared type (a number finite; null is no type). Declared signals may be left out; a
 * rule that reads one that is missing fails closed. Returns every problem, empty when they match.
 */
export function signalProblems(doc: Pick<PolicyDocument, 'signalsSchema'>, signals: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const name of Object.keys(signals)) {
    const decl = Object.prototype.hasOwnProperty.call(doc.signalsSchema, name) ? doc.signalsSchema[name] : undefined;
    if (!decl) problems.push(`signal '${name}' is not declared in signalsSchema`);
    else if (!hasSignalType(decl.type, signals[name])) problems.push(`signal '${name}' must be of type ${decl.type}`);
  }
  return problems;
}

export interface OverrideRequest {
  executionId: string;
  approved: boolean;
  approvedBy: string;
  approverRole: string;
  reason: string;
}

/** `POST /override`: every field required. */
export function parseOverrideRequest(body: unknown): OverrideRequest {
  const b = requireObject(body, '{executionId, approved, approvedBy, approverRole, reason}');
  const executionId = requiredString(b, 'executionId');
  if (typeof b.approved !== 'boolean') throw invalid('approved is required and must be a boolean.');
  return {
    executionId,
    approved: b.approved,
    approvedBy: requiredString(b, 'approvedBy'),
    approverRole: requiredString(b, 'approverRole'),
    reason: requiredString(b, 'reason', 2000),
  };
}

export interface ConfirmRequest {
  attestation: Body;
  executionId: string;
  action: { actionType: string; actionId: string; actionTimestamp: string; actionDetails?: Body };
  /** `action.actionTimestamp` in milliseconds. */
  actionAt: number;
  timeWindowSeconds: number;
}

/**
 * A date-time of profile A's requests, in milliseconds: RFC 3339 read strictly (parseRfc3339), with
 * at most nine fraction digits (nanoseconds, the finest any caller's clock gives).
 */
export function attestationTime(v: unknown): number | undefined {
  if (typeof v !== 'string' || /\.\d{10}/.test(v)) return undefined;
  return parseRfc3339(v);
}

/** `POST /confirm-execution`. */
export function parseConfirmRequest(body: unknown): ConfirmRequest {
  const b = requireObject(body, '{attestation, executedAction, timeWindowSeconds?}');
  if (!isPlainObject(b.attestation)) throw invalid('attestation is required and must be an object (the attestation as POST /execute answered it).');
  const executionId = requiredString(b.attestation, 'executionId', MAX_ID_LENGTH, 'attestation.executionId');
  const a = b.executedAction;
  if (!isPlainObject(a)) throw invalid('executedAction is required and must be an object.');
  const actionType = requiredString(a, 'actionType', MAX_ID_LENGTH, 'executedAction.actionType');
  const actionId = requiredString(a, 'actionId', MAX_ID_LENGTH, 'executedAction.actionId');
  const actionAt = attestationTime(a.actionTimestamp);
  if (actionAt === undefined) throw invalid('executedAction.actionTimestamp is required and must be an ISO 8601 date-time (e.g. 2026-01-01T12:00:00Z).');
  if (a.actionDetails !== undefined && !isPlainObject(a.actionDetails)) throw invalid('executedAction.actionDetails must be an object.');
  const w = b.timeWindowSeconds;
  if (w !== undefined && (typeof w !== 'number' || !Number.isFinite(w) || w <= 0 || w > MAX_CONFIRMATION_WINDOW_SECONDS)) {
    throw invalid(`timeWindowSeconds must be a number greater than 0 and at most ${MAX_CONFIRMATION_WINDOW_SECONDS}.`);
  }
  return {
    attestation: b.attestation,
    executionId,
    action: { actionType, actionId, actionTimestamp: a.actionTimestamp as string, ...(a.actionDetails !== undefined ? { actionDetails: a.actionDetails } : {}) },
    actionAt,
    timeWindowSeconds: w ?? DEFAULT_CONFIRMATION_WINDOW_SECONDS,
  };
}

/** The simple variant's `POST /verify`: `executionId`, `decision`, `execution_state`, `runtimeHash`, `signature`, all required. */
export function parseSimpleVerifyRequest(body: unknown): Body {
  const b = requireObject(body, '{executionId, decision, execution_state, runtimeHash, signature}');
  for (const name of ['executionId', 'decision', 'execution_state', 'runtimeHash', 'signature']) {
    if (b[name] === undefined || b[name] === null) throw invalid(`${name} is required.`);
  }
  return b;
}

/** The attestation variant's `POST /verify`: the full attestation (an object; its checks say what is wrong with it). */
export const parseAttestationBody = (body: unknown): Body => requireObject(body, 'the ExecutionAttestation as POST /execute answered it');

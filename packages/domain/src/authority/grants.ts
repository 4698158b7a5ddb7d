/**
 * Authority grants (spec 1.8, 2.8, 4.3.11; CONTRACT "Authority grants"): which agent (a caller id)
 * may have which action decided, within limits per request on intent paths (`min`, `max`,
 * `oneOf`), until an expiry. Granted and revoked by maker-checker; nobody grants authority to
 * themselves.
 */
import type { ChangeStatus, PendingChange } from '../governance/change.js';
import { changeViewBase, changeViewDecision, readProposalFields } from '../governance/governed-registry.js';
import type { BusinessTransaction, CheckedGrant, GrantLimit } from '../execution/records.js';
import { SYSTEM_PROPOSER } from '../governance/change.js';
import { invalid } from '../shared/errors.js';
import { isCapability, readName } from '../shared/names.js';
import { isPlainObject } from '../shared/guards.js';
import { INTENT_VALUE_PATH_PATTERN, PATH_MAX_LENGTH, valueAtPath } from '../shared/request-paths.js';
import { parseRfc3339 } from '../shared/rfc3339.js';

export const AUTHORITY_GRANT_CHANGE_KIND = 'authority-grant';
export const GRANT_LIMITS_MAX = 32;
/** How many days ahead a grant may expire unless SVC_GRANT_MAX_DAYS says otherwise: about a year. */
export const GRANT_MAX_DAYS_DEFAULT = 366;
const DAY_MS = 86_400_000;
export const ONE_OF_MAX = 100;
const INTENT_PATH = new RegExp(INTENT_VALUE_PATH_PATTERN);

/** A grant as stored: `grantId` is the approved grant change's id. */
export interface AuthorityGrant {
  grantId: string;
  grantee: string;
  action: string;
  limits: GrantLimit[];
  expiresAt: string;
  proposer: string;
  approvedBy: string;
  grantedAt: string;
  /** Set when a revoke change was approved. */
  revokedAt?: string;
}

export type GrantPayload = { kind: 'grant'; grantee: string; action: string; limits: GrantLimit[]; expiresAt: string };
/** A revoke names the grant, with its grantee and action for whoever decides. */
export type GrantRevokePayload = { kind: 'revoke'; grantId: string; grantee: string; action: string };
export type AuthorityGrantChangePayload = GrantPayload | GrantRevokePayload;

export interface AuthorityGrantChangeView {
  id: string;
  kind: 'grant' | 'revoke';
  reason: string | null;
  proposer: string;
  status: ChangeStatus;
  createdAt: string;
  grantee: string;
  action: string;
  limits?: GrantLimit[];
  expiresAt?: string;
  /** Revoke: the grant it ends. */
  grantId?: string;
  decider?: string;
  decidedAt?: string;
  rejectionReason?: string;
  appliedAt?: string;
}

export function toGrantChangeView(c: PendingChange<AuthorityGrantChangePayload>): AuthorityGrantChangeView {
  const p = c.payload;
  return {
    ...changeViewBase(c),
    grantee: p.grantee,
    action: p.action,
    ...(p.kind === 'grant' ? { limits: p.limits, expiresAt: p.expiresAt } : { grantId: p.grantId }),
    ...changeViewDecision(c),
  };
}

export const describeGrantChange = (c: PendingChange<AuthorityGrantChangePayload>): string =>
  c.payload.kind === 'grant'
    ? `grant '${c.payload.grantee}' authority for '${c.payload.action}' until ${c.payload.expiresAt} (${c.payload.limits.length} limit(s))`
    : `revoke grant ${c.payload.grantId} ('${c.payload.grantee}', '${c.payload.action}')`;

/** What `assessment.authority.grant` holds. */
export const checkedGrant = (g: AuthorityGrant): CheckedGrant => ({ grantId: g.grantId, action: g.action, limits: g.limits, expiresAt: g.expiresAt });

/** The grant in force for the pipeline's re-check: not revoked and not expired at `now`. */
export const inForce = (g: AuthorityGrant | undefined, now: number): boolean => g !== undefined && g.revokedAt === undefined && Date.parse(g.expiresAt) > now;

/** The first limit the request breaks, said in words; undefined when every limit holds. */
export function brokenLimit(limits: readonly GrantLimit[], tx: BusinessTransaction): string | undefined {
  for (const limit of limits) {
    const value = valueAtPath(tx, limit.path);
    if (value === undefined) return `${limit.path} is missing`;
    if (limit.min !== undefined || limit.max !== undefined) {
      if (typeof value !== 'number') return `${limit.path} is not a number`;
      if (limit.min !== undefined && value < limit.min) return `${limit.path} is below ${limit.min}`;
      if (limit.max !== undefined && value > limit.max) return `${limit.path} is above ${limit.max}`;
    }
    if (limit.oneOf !== undefined && !limit.oneOf.some((allowed) => allowed === value)) {
      return `${limit.path} is not one of ${limit.oneOf.map((v) => JSON.stringify(v)).join(', ')}`;
    }
  }
  return undefined;
}

const FIELDS = {
  grant: ['kind', 'grantee', 'action', 'limits', 'expiresAt', 'reason'],
  revoke: ['kind', 'grantId', 'reason'],
} as const;

export type GrantProposalInput = { kind: 'grant'; payload: Omit<GrantPayload, 'kind'> } | { kind: 'revoke'; grantId: string };

/**
 * The rules of a proposal that need no lookup; each broken one a 400 naming the field. A grant
 * expires in the future and at most `maxDays` ahead (SVC_GRANT_MAX_DAYS): authority is reviewed,
 * not granted until 9999.
 */
export function readGrantProposal(input: unknown, now: Date, maxDays: number): GrantProposalInput {
  const { kind, body } = readProposalFields(input, FIELDS, '{"kind": "grant" | "revoke", …}');
  if (kind === 'revoke') {
    // The id of the grant to revoke, as GET /authority-grants shows it.
    return { kind, grantId: readName('changeId', body.grantId, 'grantId') };
  }
  // The caller id of the agent: a caller id people read, so visible ASCII (as `ets keys add` makes them).
  const grantee = readName('callerId', body.grantee, 'grantee');
  if (grantee === SYSTEM_PROPOSER) throw invalid(`grantee must not be '${SYSTEM_PROPOSER}': it is the service itself.`);
  if (!isCapability(body.action)) {
    throw invalid('action is required: a capability namespace:verb (at most 128 characters), such as payments:transfer.');
  }
  const expiresAtMs = typeof body.expiresAt === 'string' ? parseRfc3339(body.expiresAt) : undefined;
  if (expiresAtMs === undefined) throw invalid('expiresAt is required: a real RFC 3339 date-time, such as 2026-12-31T23:59:59Z.');
  if (expiresAtMs <= now.getTime()) throw invalid(`expiresAt must be in the future (now ${now.toISOString()}).`);
  if (expiresAtMs > now.getTime() + maxDays * DAY_MS) {
    throw invalid(`expiresAt must be at most ${maxDays} days ahead (SVC_GRANT_MAX_DAYS) of the server's clock: no later than ${new Date(now.getTime() + maxDays * DAY_MS).toISOString()}.`);
  }
  return {
    kind,
    payload: { grantee, action: body.action, limits: readLimits(body.limits), expiresAt: new Date(expiresAtMs).toISOString() },
  };
}

const isScalar = (v: unknown): v is string | number | boolean => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

function readLimits(value: unknown): GrantLimit[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid('limits must be an array of {path, min?, max?, oneOf?} (empty: no limit).');
  if (value.length > GRANT_LIMITS_MAX) throw invalid(`limits must have at most ${GRANT_LIMITS_MAX} entries.`);
  return value.map((raw, i): GrantLimit => {
    const at = `limits[${i}]`;
    if (!isPlainObject(raw)) throw invalid(`${at} must be an object {path, min?, max?, oneOf?}.`);
    for (const field of Object.keys(raw)) {
      if (!['path', 'min', 'max', 'oneOf'].includes(field)) throw invalid(`${at}.${field} is not a field of a limit (fields: path, min, max, oneOf).`);
    }
    if (typeof raw.path !== 'string' || raw.path.length > PATH_MAX_LENGTH || !INTENT_PATH.test(raw.path)) {
      throw invalid(`${at}.path must be an intent path: intent.action or intent.parameters.<key> (e.g. intent.parameters.amount).`);
    }
    const limit: GrantLimit = { path: raw.path };
    for (const bound of ['min', 'max'] as const) {
      if (raw[bound] === undefined) continue;
      if (typeof raw[bound] !== 'number' || !Number.isFinite(raw[bound])) throw invalid(`${at}.${bound} must be a number.`);
      limit[bound] = raw[bound];
    }
    if (limit.min !== undefined && limit.max !== undefined && limit.min > limit.max) throw invalid(`${at}.min must not be above ${at}.max.`);
    if (raw.oneOf !== undefined) {
      if (!Array.isArray(raw.oneOf) || raw.oneOf.length === 0 || raw.oneOf.length > ONE_OF_MAX || !raw.oneOf.every(isScalar)) {
        throw invalid(`${at}.oneOf must be a list of 1 to ${ONE_OF_MAX} strings, numbers or booleans.`);
      }
      limit.oneOf = raw.oneOf;
    }
    if (limit.min === undefined && limit.max === undefined && limit.oneOf === undefined) throw invalid(`${at} must set min, max or oneOf.`);
    return limit;
  });
}

/**
 * The names, versions and ids that people read (CONTRACT "Review rules, round 2"), in one place:
 * policy names and versions, capabilities, business signal source names, caller ids (grantees),
 * change ids (grant ids), MCP server names. Each is visible ASCII from a pattern documented in the
 * OpenAPI document and the guide, so that two that look alike are the same: a version `1.0.0 `, or
 * `1.0.0` followed by a zero-width space, would otherwise be published beside `1.0.0` and shown
 * as it. Whitespace, control characters, invisible characters and every non-ASCII character
 * (Cyrillic `а` for Latin `a`, full-width digits) are refused with 400 where such a name enters.
 *
 * Patterns are strings (JSON Schema and OpenAPI `pattern:` take them as they are) and each has the
 * sentence a 400 says about it.
 */
import { invalid } from './errors.js';

export interface NameRule {
  /** ECMAScript pattern, anchored. */
  readonly pattern: string;
  readonly maxLength: number;
  /** What the pattern allows, in words, for error messages and the guide. */
  readonly says: string;
}

const rule = (pattern: string, maxLength: number, says: string): NameRule => Object.freeze({ pattern, maxLength, says });

/** Policy name: also a URL path segment (`/policies/{name}/…`). */
export const POLICY_NAME_PATTERN = '^[a-z0-9][a-z0-9-]{0,127}$';
/** Policy version: `1.0.0`, `2024.06.1-rc.1+build_7`, `v3`; never `.` or `..` (it is a URL path segment too). */
export const POLICY_VERSION_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$';
export const POLICY_VERSION_MAX_LENGTH = 64;
/** Capability (an action): `namespace:verb` (spec 2.5). */
export const CAPABILITY_PATTERN_SOURCE = '^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*:[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$';
export const CAPABILITY_MAX_LENGTH = 128;
/** The name of a business signal source (CONTRACT "Business signal sources"). */
export const SOURCE_NAME_PATTERN = '^[a-z0-9][a-z0-9-]{0,63}$';
/**
 * A caller id (the owner of an API key, a grantee): 1 to 256 visible ASCII characters, so an
 * e-mail address or `team/agent-7` is one, and `alice` followed by an invisible character is not.
 */
export const CALLER_ID_PATTERN = '^[\\x21-\\x7e]{1,256}$';
/** The id of a change, a grant or a registration: a lower-case UUID, as the service makes them. */
export const CHANGE_ID_PATTERN = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
/** The name of an upstream MCP server (CONTRACT "MCP gateway"): also part of a capability `mcp-<server>:<tool>`. */
export const MCP_SERVER_NAME_PATTERN = '^[a-z][a-z0-9-]{0,39}$';

/** Every rule, by what it names. */
export const NAME_RULES = {
  policyName: rule(POLICY_NAME_PATTERN, 128, '1 to 128 lowercase letters, digits or hyphens, starting with a letter or digit'),
  policyVersion: rule(
    POLICY_VERSION_PATTERN,
    POLICY_VERSION_MAX_LENGTH,
    '1 to 64 ASCII letters, digits, dots, hyphens, underscores or plus signs, starting with a letter or digit (such as 1.0.0)',
  ),
  capability: rule(CAPABILITY_PATTERN_SOURCE, CAPABILITY_MAX_LENGTH, 'namespace:verb in lowercase letters and digits, parts joined by - or _, at most 128 characters (such as payments:transfer)'),
  sourceName: rule(SOURCE_NAME_PATTERN, 64, '1 to 64 lowercase letters, digits or hyphens, starting with a letter or digit'),
  callerId: rule(CALLER_ID_PATTERN, 256, '1 to 256 visible ASCII characters (no space, no control or invisible character, nothing outside ASCII)'),
  changeId: rule(CHANGE_ID_PATTERN, 36, 'a lower-case UUID'),
  mcpServerName: rule(MCP_SERVER_NAME_PATTERN, 40, '1 to 40 lowercase letters, digits or hyphens, starting with a letter'),
} as const satisfies Record<string, NameRule>;

export type NameKind = keyof typeof NAME_RULES;

const compiled = Object.fromEntries(Object.entries(NAME_RULES).map(([k, r]) => [k, new RegExp(r.pattern)])) as Record<NameKind, RegExp>;

/** True when `value` is a `kind` name: a string of its pattern (which bounds its length). */
export const isName = (kind: NameKind, value: unknown): value is string =>
  typeof value === 'string' && value.length <= NAME_RULES[kind].maxLength && compiled[kind].test(value);

/** What is wrong with `value` as a `kind` name, naming `field`; undefined when nothing is. */
export function nameProblem(kind: NameKind, value: unknown, field: string): string | undefined {
  if (isName(kind, value)) return undefined;
  const r = NAME_RULES[kind];
  const what = typeof value !== 'string' || value === '' ? 'is required' : 'is not valid';
  return `${field} ${what}: ${r.says} (${r.pattern}).`;
}

/** `value` as a `kind` name, or a 400 naming `field`. */
export function readName(kind: NameKind, value: unknown, field: string): string {
  const problem = nameProblem(kind, value, field);
  if (problem !== undefined) throw invalid(problem);
  return value as string;
}

/** A capability `namespace:verb` (CAPABILITY_PATTERN_SOURCE, at most CAPABILITY_MAX_LENGTH characters). */
export const isCapability = (v: unknown): v is string => isName('capability', v);

/**
 * Everything a person may decide, one module per kind, all of the same small shape (chosen by
 * `KINDS`): where the pending ones are listed, how one reads in the inbox, where a decision goes
 * and what is signed for it. A kind whose list route the server does not have (404) has none.
 */
import { enc } from './api';

export type KindKey = 'policy' | 'connector' | 'source' | 'grant' | 'mcp-server' | 'held';

/** A change or held transaction as it is listed (the service's JSON). */
export type Raw = Record<string, unknown>;

export interface InboxItem {
  kind: KindKey;
  id: string;
  title: string;
  summary: string;
  /** Who asked: the proposer of a change, the requesting caller of a held transaction. */
  requester: string;
  createdAt: string;
  /** When it is decided by itself if nobody decides (a held transaction's expiry). */
  deadline?: string;
  status: string;
  /** Pending: it can still be decided. */
  pending: boolean;
  raw: Raw;
}

export interface Kind {
  key: KindKey;
  /** What one of them is called, singular. */
  label: string;
  /** The list of pending ones (paged). */
  pendingList: string;
  /** The list to find one in by id, whatever its status. */
  anyList: string;
  /** One by id, when the service has such a route. */
  one?: (id: string) => string;
  toItem(raw: Raw): InboxItem;
  approvePath(id: string): string;
  rejectPath(id: string): string;
  /** `step-up`: a step-up envelope for both; `approval`: a signed approval to approve, an envelope naming the transaction to reject. */
  decision: 'step-up' | 'approval';
}

const text = (v: unknown): string => (typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v));

/** The part every maker-checker change shares (CONTRACT "Governance"). */
function change(key: KindKey, label: string, base: string, title: (r: Raw) => string, summary: (r: Raw) => string): Kind {
  return {
    key,
    label,
    pendingList: `${base}?status=PENDING_APPROVAL`,
    anyList: base,
    toItem: (r) => ({
      kind: key,
      id: text(r.id),
      title: title(r),
      summary: summary(r),
      requester: text(r.proposer),
      createdAt: text(r.createdAt),
      status: text(r.status),
      pending: r.status === 'PENDING_APPROVAL',
      raw: r,
    }),
    approvePath: (id) => `${base}/${enc(id)}/approve`,
    rejectPath: (id) => `${base}/${enc(id)}/reject`,
    decision: 'step-up',
  };
}

const reasonOf = (r: Raw): string => (typeof r.reason === 'string' && r.reason !== '' ? ` — “${r.reason}”` : '');

/** `mcp-<server>:<tool>`: a call through the MCP gateway (CONTRACT "MCP gateway"). */
export const mcpCallOf = (action: unknown): { server: string; tool: string } | undefined => {
  const m = typeof action === 'string' ? /^mcp-([a-z][a-z0-9-]*):(.+)$/.exec(action) : null;
  return m ? { server: m[1]!, tool: m[2]! } : undefined;
};

const held: Kind = {
  key: 'held',
  label: 'held transaction',
  pendingList: '/overrides?status=PENDING',
  anyList: '/overrides',
  one: (id) => `/overrides/${enc(id)}`,
  toItem: (r) => {
    const mcp = mcpCallOf(r.action);
    const decision = (r.decision ?? {}) as Raw;
    return {
      kind: 'held',
      id: text(r.businessTransactionId),
      title: mcp ? `MCP call ${mcp.server} → ${mcp.tool}` : `Held ${text(r.action)}`,
      summary: `${text(decision.matchedRuleId) || 'rule'}: ${text(decision.reason)}`,
      requester: text(r.callerId),
      createdAt: text(r.createdAt),
      deadline: typeof r.expiresAt === 'string' ? r.expiresAt : undefined,
      status: text(r.status),
      pending: r.status === 'PENDING',
      raw: r,
    };
  },
  approvePath: (id) => `/overrides/${enc(id)}/approve`,
  rejectPath: (id) => `/overrides/${enc(id)}/reject`,
  decision: 'approval',
};

export const KINDS: readonly Kind[] = [
  change('policy', 'policy change', '/policies/pending-changes', (r) => `Policy ${text(r.policyName)} ${r.baseVersion === r.policyVersion ? text(r.policyVersion) + ' (first version)' : `${text(r.baseVersion)} → ${text(r.policyVersion)}`}`, reasonOf),
  change('connector', 'connector change', '/external-connectors/changes', (r) => `Connector ${text(r.kind)} ${text(r.capability)}`, (r) => `${text(r.endpoint)}${reasonOf(r)}`),
  change('source', 'source change', '/business-signal-sources/changes', (r) => `Signal source ${text(r.kind)} ${text(r.name)}`, (r) => `${text(r.endpoint)}${reasonOf(r)}`),
  change('grant', 'grant change', '/authority-grants/changes', (r) => (r.kind === 'revoke' ? `Grant revoke ${text(r.grantId)}` : `Grant ${text(r.action)} to ${text(r.grantee)}`), (r) => `${r.expiresAt ? `until ${text(r.expiresAt)}` : ''}${reasonOf(r)}`),
  change('mcp-server', 'MCP server change', '/mcp-servers/changes', (r) => `MCP server ${text(r.kind)} ${text(r.name)}`, (r) => `${text(r.url ?? r.stdio)}${reasonOf(r)}`),
  held,
];

export const kindOf = (key: string): Kind | undefined => KINDS.find((k) => k.key === key);

/** Newest first. */
export const newestFirst = (a: InboxItem, b: InboxItem): number => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0);

import { useCallback, useEffect, useState } from 'preact/hooks';
import { heldApprovalPayload, type ApprovalScope } from '@ets/client';
import { getJson, listAll } from '../api';
import { attended, REFRESH_MS } from '../attention';
import { kindOf, mcpCallOf, type InboxItem, type Kind, type Raw } from '../kinds';
import { Impact } from '../items/impact';
import { PolicyDiff } from '../items/policy-diff';
import { publishedPolicy } from '../policies';
import { href } from '../router';
import { approvalScopeOf, envelopePayload, type Payload } from '../signing';
import { errorText, Facts, Json, Notice, PageTitle, untilText, When } from '../ui';
import { Decision, type DecisionSpec } from './decision';

/**
 * Reads it again while it waits: one page of the pending list for a kind without a route of its own
 * (the whole list is read only once it has left the pending ones).
 */
async function reloadPending(kind: Kind, id: string): Promise<InboxItem | undefined> {
  if (!kind.one) {
    const raw = (await listAll<Raw>(kind.pendingList, 1))?.find((r) => r.id === id);
    if (raw) return kind.toItem(raw);
  }
  return loadItem(kind, id);
}

async function loadItem(kind: Kind, id: string): Promise<InboxItem | undefined> {
  if (kind.one) return kind.toItem(await getJson<Raw>(kind.one(id)));
  const all = (await listAll<Raw>(kind.anyList, 50)) ?? [];
  const raw = all.find((r) => r.id === id);
  return raw && kind.toItem(raw);
}

/** One item: what exactly is asked, and (when it waits and is not one's own) the decision. */
export function ItemPage({ kind: kindKey, id, me }: { kind: string; id: string; me: string }) {
  const kind = kindOf(kindKey);
  const [item, setItem] = useState<InboxItem | null | undefined>(undefined);
  const [error, setError] = useState<string | undefined>();
  const [decided, setDecided] = useState<{ action: 'approve' | 'reject'; answer: unknown } | undefined>();
  const load = useCallback(() => {
    if (!kind) return;
    loadItem(kind, id).then((i) => setItem(i ?? null), (e) => setError(errorText(e)));
  }, [kind, id]);
  useEffect(load, [load]);
  // While it waits it is read again now and then, and once its deadline passes: another approver
  // may decide it, or its expiry refuse it, and this page then says so instead of offering a
  // decision the service would refuse.
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!kind || !item?.pending) return;
    const untilDeadline = item.deadline ? Date.parse(item.deadline) - Date.now() + 1000 : Infinity;
    const timer = setTimeout(
      () => (attended() ? reloadPending(kind, id).then((i) => setItem(i ?? null), (e) => setError(errorText(e))) : setTick((t) => t + 1)),
      Math.max(1000, Math.min(REFRESH_MS, untilDeadline)),
    );
    return () => clearTimeout(timer);
  }, [kind, id, item, tick]);

  if (!kind) return <Notice kind="error">Unknown kind of item: {kindKey}</Notice>;
  return (
    <section>
      <p class="crumbs">
        <a href={href.inbox()}>Inbox</a> › {kind.label}
      </p>
      {error ? <Notice kind="error">{error}</Notice> : null}
      {item === null ? <Notice kind="error">No {kind.label} with id {id}.</Notice> : null}
      {item ? (
        <>
          <PageTitle>{item.title}</PageTitle>
          <p class="status-line">
            <span class={`status ${item.pending ? 'pending' : 'decided'}`} data-testid="status">
              {item.status}
            </span>{' '}
            asked by <strong>{item.requester}</strong> <When at={item.createdAt} />
            {item.deadline && item.pending ? (
              <>
                {' '}
                · decided by expiry {untilText(item.deadline)} (<When at={item.deadline} />)
              </>
            ) : null}
          </p>
          {kind.key === 'policy' ? <PolicyChange raw={item.raw} /> : kind.key === 'held' ? <HeldTransaction raw={item.raw} /> : <RegistryChange raw={item.raw} />}
          {item.pending && item.requester === me ? (
            <Notice kind="info">
              <span data-testid="own">You {kind.key === 'held' ? 'made this request' : 'proposed this'}: another person decides it.</span>
            </Notice>
          ) : null}
          {decided ? <Decided kind={kind} {...decided} /> : null}
          {item.pending && item.requester !== me ? (
            <Decide
              kind={kind}
              item={item}
              me={me}
              onDecided={(action, answer) => {
                setDecided({ action, answer });
                load();
              }}
            />
          ) : null}
        </>
      ) : item === undefined && !error ? (
        <p class="muted">Loading…</p>
      ) : null}
    </section>
  );
}

/** What the service answered a decision made here; a held transaction's approval answers what `POST /execute` would have. */
function Decided({ kind, action, answer }: { kind: Kind; action: 'approve' | 'reject'; answer: unknown }) {
  const a = (answer ?? {}) as { executionStatus?: string; businessTransactionId?: string };
  return (
    <Notice kind="ok">
      <strong data-testid="decided">{action === 'approve' ? 'Approved.' : 'Rejected.'}</strong> The service recorded your signed decision.
      {kind.key === 'held' && a.executionStatus ? ` The transaction: ${a.executionStatus}.` : ''}
      {kind.key === 'held' && a.businessTransactionId ? (
        <>
          {' '}
          <a href={href.record(a.businessTransactionId)}>Its record</a>
        </>
      ) : null}
    </Notice>
  );
}

function Decide({ kind, item, me, onDecided }: { kind: Kind; item: InboxItem; me: string; onDecided: (action: 'approve' | 'reject', answer: unknown) => void }) {
  const [scope, setScope] = useState<{ scope?: ApprovalScope; error?: string } | undefined>(kind.decision === 'approval' ? undefined : {});
  const raw = item.raw as { businessTransactionId: string; action: string; parameters: unknown; signals: Record<string, unknown>; policy?: { name: string; version: string } };
  useEffect(() => {
    if (kind.decision !== 'approval') return;
    // The approval must scope what the policy names (CONTRACT "Signed approvals"): read it from the policy version that decided.
    const policy = raw.policy;
    (policy ? publishedPolicy(policy.name, policy.version) : Promise.resolve(undefined)).then(
      (doc) => setScope(approvalScopeOf(raw, doc?.approvalScope)),
      (e) => setScope({ error: `the policy could not be read: ${errorText(e)}` }),
    );
  }, [kind, item.id]);
  if (!scope) return <p class="muted">Reading what the approval must scope…</p>;
  const spec: DecisionSpec =
    kind.decision === 'step-up'
      ? {
          what: `this ${kind.label}`,
          prepare: (action, reason) => envelopePayload({ changeId: item.id }, action, me, reason),
          path: (action) => (action === 'approve' ? kind.approvePath(item.id) : kind.rejectPath(item.id)),
        }
      : {
          what: `this ${kind.label}`,
          prepare: (action, reason) => {
            if (action === 'reject') return envelopePayload({ businessTransactionId: item.id }, 'reject', me, reason);
            if (!scope.scope) throw new Error(`This transaction cannot be approved here: ${scope.error}.`);
            // The payload is built by @ets/client, as `ets overrides approve` and the client's `approve` build it.
            return heldApprovalPayload({ ...raw, scope: scope.scope }, me) as unknown as Payload;
          },
          path: (action) => (action === 'approve' ? kind.approvePath(item.id) : kind.rejectPath(item.id)),
        };
  return <Decision spec={spec} onDecided={onDecided} />;
}

function PolicyChange({ raw }: { raw: Raw }) {
  const name = String(raw.policyName);
  const base = String(raw.baseVersion);
  const version = String(raw.policyVersion);
  const first = base === version;
  const [before, setBefore] = useState<{ doc?: Record<string, unknown>; missing?: boolean; error?: string }>({});
  useEffect(() => {
    if (first) return;
    publishedPolicy(name, base).then(
      (doc) => setBefore(doc ? { doc } : { missing: true }),
      (e) => setBefore({ error: errorText(e) }),
    );
  }, [name, base, first]);
  return (
    <>
      <Facts
        rows={[
          ['Policy', <code>{name}</code>],
          ['Replaces', first ? 'nothing (a first version)' : <code>{base}</code>],
          ['Publishes', <code>{version}</code>],
          ['Reason', String(raw.reason ?? '—')],
          ['Content hash', <code class="hash">{String(raw.contentHash)}</code>],
          ...(raw.decider ? ([['Decided by', `${String(raw.decider)}${raw.rejectionReason ? ` — “${String(raw.rejectionReason)}”` : ''}`]] as [string, string][]) : []),
        ]}
      />
      <section aria-labelledby="diff-heading">
        <h2 id="diff-heading">What changes</h2>
        {before.error ? <Notice kind="error">The version in effect could not be read: {before.error}</Notice> : null}
        {before.missing ? <Notice kind="info">Version {base} is not found among the published versions; the proposal is shown alone.</Notice> : null}
        {first || before.doc || before.missing ? (
          <PolicyDiff before={before.doc} after={raw.proposedContent} beforeLabel={first ? 'No version yet' : `${base} (in effect)`} afterLabel={`${version} (proposed)`} />
        ) : !before.error ? (
          <p class="muted">Reading version {base}…</p>
        ) : null}
      </section>
      <Impact changeId={String(raw.id)} />
    </>
  );
}

/** A connector, source, grant or MCP-server change: every field it carries. */
function RegistryChange({ raw }: { raw: Raw }) {
  const shown = ['kind', 'capability', 'name', 'endpoint', 'url', 'stdio', 'policyName', 'forwardedParameters', 'tools', 'timeoutMs', 'publicKey', 'grantee', 'action', 'limits', 'expiresAt', 'grantId', 'registrationId', 'reason', 'proposer', 'decider', 'decidedAt', 'rejectionReason'];
  const rows = shown.filter((k) => raw[k] !== undefined && raw[k] !== null).map((k): [string, preact.ComponentChildren] => [k, typeof raw[k] === 'string' ? String(raw[k]) : <code>{JSON.stringify(raw[k])}</code>]);
  return (
    <>
      <Facts rows={rows} />
      <details>
        <summary>The change as the service lists it</summary>
        <Json value={raw} />
      </details>
    </>
  );
}

/** A held transaction: the request, its signals, the decision and why, and what an approval binds to. */
function HeldTransaction({ raw }: { raw: Raw }) {
  const mcp = mcpCallOf(raw.action);
  const decision = (raw.decision ?? {}) as Raw;
  const policy = (raw.policy ?? {}) as Raw;
  return (
    <>
      <Facts
        rows={[
          ['Transaction', <a href={href.record(String(raw.businessTransactionId))}><code>{String(raw.businessTransactionId)}</code></a>],
          ['Caller', String(raw.callerId)],
          ['Action', <code>{String(raw.action)}</code>],
          ...(mcp ? ([['MCP call', `tool ${mcp.tool} of server ${mcp.server}`]] as [string, string][]) : []),
          ['Decision', `${String(decision.action ?? '')}${decision.requires_override || decision.requiresOverride ? ' (needs a human)' : ''}`],
          ['Rule', <code>{String(decision.matchedRuleId ?? '—')}</code>],
          ['Reason', String(decision.reason ?? '—')],
          ['Policy', `${String(policy.name)} ${String(policy.version)}`],
          ['Signals hash (the approval binds to it)', <code class="hash">{String(raw.signalsHash)}</code>],
          ['Transaction hash', <code class="hash">{String(raw.businessTransactionHash)}</code>],
          ...(raw.decidedBy ? ([['Decided by', `${String(raw.decidedBy)}${raw.reason ? ` — “${String(raw.reason)}”` : ''}`]] as [string, string][]) : []),
          ...(raw.decidedAt ? ([['Decided at', <When at={String(raw.decidedAt)} />]] as [string, preact.ComponentChildren][]) : []),
        ]}
      />
      <h2>{mcp ? 'Arguments' : 'Parameters'}</h2>
      <Json value={raw.parameters} label="Parameters" />
      <h2>Signals</h2>
      <Json value={raw.signals} label="Signals" />
    </>
  );
}

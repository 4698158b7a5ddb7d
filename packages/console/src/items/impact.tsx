import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, enc, errorOf } from '../api';
import { href } from '../router';
import { errorText, Notice } from '../ui';

interface Outcome {
  action: string;
  matchedRuleId: string | null;
}

export interface ImpactReport {
  policyName: string;
  fromVersion: string | null;
  toVersion: string;
  replayed: number;
  changed: number;
  byTransition: Record<string, number>;
  byRule: Record<string, number>;
  examples: { businessTransactionId: string; before: Outcome; after: Outcome }[];
}

/** The service's action in words: `requires_override` is an approval that waits for a human. */
const ACTION_WORDS: Record<string, string> = { requires_override: 'needs a human' };
const actionText = (action: string): string => ACTION_WORDS[action] ?? action;
const outcome = (o: Outcome | undefined) => (o ? `${actionText(o.action)}${o.matchedRuleId ? ` (${o.matchedRuleId})` : ''}` : '—');

/**
 * What the proposed version would have decided over recent decisions of the same policy
 * (`GET /policies/pending-changes/{id}/impact`): how many would change and how, by rule, with
 * examples that open their records. A service without the preview says so.
 */
export function Impact({ changeId }: { changeId: string }) {
  const [state, setState] = useState<{ report?: ImpactReport; unavailable?: boolean; error?: string }>({});
  useEffect(() => {
    call<ImpactReport>('GET', `/policies/pending-changes/${enc(changeId)}/impact?limit=1000`).then(
      (a) => setState(a.status === 200 ? { report: a.body } : a.status === 404 ? { unavailable: true } : { error: errorOf(a).message }),
      (e) => setState({ error: errorText(e) }),
    );
  }, [changeId]);

  return (
    <section class="impact" aria-labelledby="impact-heading" data-testid="impact">
      <h2 id="impact-heading">Impact preview</h2>
      {!state.report && !state.unavailable && !state.error ? <p class="muted">Replaying recent decisions…</p> : null}
      {state.unavailable ? <Notice kind="info">Impact preview unavailable on this service.</Notice> : null}
      {state.error ? <Notice kind="error">Impact preview failed: {state.error}</Notice> : null}
      {state.report ? <ImpactReportView report={state.report} /> : null}
    </section>
  );
}

function ImpactReportView({ report }: { report: ImpactReport }) {
  const transitions = Object.entries(report.byTransition);
  const rules = Object.entries(report.byRule);
  return (
    <>
      <p class="impact-summary" data-testid="impact-summary">
        Replayed the last <strong>{report.replayed}</strong> decision{report.replayed === 1 ? '' : 's'} of {report.policyName}
        {report.fromVersion ? ` (${report.fromVersion})` : ''} with {report.toVersion}: <strong>{report.changed}</strong> would change.
      </p>
      <Counts caption="How they would change" what="Before → after" rows={transitions.map(([t, n]) => [t.split('->').map(actionText).join(' → '), n])} />
      <Counts caption={`Rule deciding under ${report.toVersion}`} what="Rule" rows={rules.map(([r, n]) => [<code>{r}</code>, n])} />
      {report.examples.length > 0 ? (
        <table class="compact examples">
          <caption>Examples</caption>
          <thead>
            <tr>
              <th scope="col">Transaction</th>
              <th scope="col">Decided</th>
              <th scope="col">Would decide</th>
            </tr>
          </thead>
          <tbody>
            {report.examples.map((e) => (
              <tr key={e.businessTransactionId}>
                <td>
                  <a href={href.record(e.businessTransactionId)}>
                    <code>{e.businessTransactionId}</code>
                  </a>
                </td>
                <td>{outcome(e.before)}</td>
                <td>{outcome(e.after)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}

/** Decisions counted by something (a transition, a rule); nothing when there are none. */
function Counts({ caption, what, rows }: { caption: string; what: string; rows: [ComponentChildren, number][] }) {
  if (rows.length === 0) return null;
  return (
    <table class="compact">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">{what}</th>
          <th scope="col">Decisions</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(([name, n], i) => (
          <tr key={i}>
            <td>{name}</td>
            <td>{n}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

import { useEffect, useState } from 'preact/hooks';
import { call, enc, errorOf } from '../api';
import { href } from '../router';
import { Check, errorText, Facts, Json, Notice, PageTitle, When } from '../ui';
import { verifyInBrowser, type CheckLine } from '../verify';

interface Served {
  businessTransactionId: string;
  callerId: string;
  outcome: string;
  createdAt: string;
  trustRecord?: Record<string, unknown>;
  refusal?: Record<string, unknown>;
}

type Verdict = { kind: string; valid: boolean; checks: CheckLine[] };

/** A verification, each check shown: green when every one passed, red otherwise. */
function VerdictView({ verdict, testid }: { verdict: Verdict | undefined; testid: string }) {
  if (!verdict) return <p class="muted">Verifying in this browser…</p>;
  return (
    <div class={`verdict ${verdict.valid ? 'valid' : 'invalid'}`} data-testid={testid} data-valid={String(verdict.valid)}>
      <p class="verdict-line" role="status">
        {verdict.valid ? `Verified: this ${verdict.kind} is authentic and in the transparency log.` : `NOT VALID: this ${verdict.kind} fails ${verdict.checks.filter((c) => !c.ok).length} check(s).`}
      </p>
      <ul class="checks">
        {verdict.checks.map((c) => (
          <Check key={c.name} {...c} />
        ))}
      </ul>
    </div>
  );
}

/**
 * A record, verified in this browser against the service's published keys, and its inclusion in
 * the transparency log; and a pasted copy verified the same way (a changed copy shows red).
 */
export function RecordPage({ id }: { id: string }) {
  const [served, setServed] = useState<Served | null | undefined>(undefined);
  const [error, setError] = useState<string | undefined>();
  const [verdict, setVerdict] = useState<Verdict | undefined>();
  const [pasted, setPasted] = useState<{ verdict?: Verdict; error?: string; busy?: boolean }>({});

  useEffect(() => {
    setServed(undefined);
    setVerdict(undefined);
    call<Served>('GET', `/transactions/${enc(id)}`).then(
      (a) => {
        if (a.status === 404) return setServed(null);
        if (a.status !== 200) return setError(errorOf(a).message);
        setServed(a.body);
        const record = a.body.trustRecord ?? a.body.refusal;
        if (record) verifyInBrowser(record).then(setVerdict, (e) => setError(errorText(e)));
      },
      (e) => setError(errorText(e)),
    );
  }, [id]);

  const checkCopy = async (e: Event) => {
    e.preventDefault();
    const text = ((e.currentTarget as HTMLFormElement).elements.namedItem('copy') as HTMLTextAreaElement).value;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      setPasted({ error: 'That is not JSON: paste the record exactly as it was served.' });
      return;
    }
    setPasted({ busy: true });
    try {
      setPasted({ verdict: await verifyInBrowser(parsed) });
    } catch (err) {
      setPasted({ error: errorText(err) });
    }
  };

  const record = served?.trustRecord ?? served?.refusal;
  return (
    <section>
      <p class="crumbs">
        <a href={href.records()}>Records</a> › {id}
      </p>
      <PageTitle>Transaction {id}</PageTitle>
      {error ? <Notice kind="error">{error}</Notice> : null}
      {served === null ? <Notice kind="error">No transaction with this id (or not one you may read).</Notice> : null}
      {served ? (
        <>
          <Facts
            rows={[
              ['Caller', served.callerId],
              ['Outcome', <span class={`outcome ${served.outcome.toLowerCase()}`}>{served.outcome}</span>],
              ['Created', <When at={served.createdAt} />],
              ['Record', served.trustRecord ? 'Execution Trust Record' : served.refusal ? 'Refusal Record' : 'none yet'],
            ]}
          />
          {served.outcome === 'HELD' ? (
            <Notice kind="info">
              <span data-testid="held-notice">
                This transaction waits for a human decision. <a href={href.item('held', served.businessTransactionId)}>Open it to decide</a>
              </span>
            </Notice>
          ) : null}
          {record ? (
            <>
              <h2>Verification in this browser</h2>
              <VerdictView verdict={verdict} testid="verdict" />
              <details>
                <summary>The record as served</summary>
                <Json value={record} label="The signed record" />
              </details>
            </>
          ) : null}
        </>
      ) : null}
      <section aria-labelledby="copy-heading">
        <h2 id="copy-heading">Verify a copy</h2>
        <p>Paste a copy of a signed record (from a file, an email, another system): it is checked here exactly as above.</p>
        <form onSubmit={checkCopy} class="stack">
          <label for="copy">Signed record (JSON)</label>
          <textarea id="copy" name="copy" rows={8} spellcheck={false} />
          <button type="submit">Verify this copy</button>
        </form>
        {pasted.error ? <Notice kind="error">{pasted.error}</Notice> : null}
        {pasted.busy ? <p class="muted">Verifying…</p> : null}
        {pasted.verdict ? <VerdictView verdict={pasted.verdict} testid="copy-verdict" /> : null}
      </section>
    </section>
  );
}

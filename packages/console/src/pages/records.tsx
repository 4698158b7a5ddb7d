import { useEffect, useState } from 'preact/hooks';
import { getJson } from '../api';
import { href } from '../router';
import { errorText, Notice, PageTitle, When } from '../ui';

interface Claim {
  businessTransactionId: string;
  callerId: string;
  outcome: string;
  createdAt: string;
}

// As the service names them (CONTRACT "Held transactions": HELD waits for a human).
const OUTCOMES = ['REFUSED', 'RECORDED', 'HELD', 'EXECUTING', 'EXECUTED'];
const FILTERS = ['callerId', 'outcome', 'from', 'to'] as const;

/** Find a transaction by id, caller, outcome or date (`GET /transactions` and its filters). */
export function Records({ query }: { query: URLSearchParams }) {
  const [result, setResult] = useState<{ items: Claim[]; total: number; page: number } | undefined>();
  const [error, setError] = useState<string | undefined>();
  const page = Math.max(1, Number(query.get('page') ?? '1') || 1);

  useEffect(() => {
    const q = new URLSearchParams();
    for (const f of FILTERS) if (query.get(f)) q.set(f, query.get(f)!);
    q.set('page', String(page));
    q.set('pageSize', '25');
    setError(undefined);
    getJson<{ items: Claim[]; total: number; page: number }>(`/transactions?${q}`).then(setResult, (e) => setError(errorText(e)));
  }, [query.toString()]);

  const search = (e: Event) => {
    e.preventDefault();
    const f = e.currentTarget as HTMLFormElement;
    const value = (name: string) => (f.elements.namedItem(name) as HTMLInputElement).value.trim();
    if (value('id')) {
      location.hash = href.record(value('id'));
      return;
    }
    const next = new URLSearchParams();
    for (const name of FILTERS) if (value(name)) next.set(name, value(name));
    location.hash = href.records(next);
  };
  const pageLink = (p: number) => {
    const q = new URLSearchParams(query);
    q.set('page', String(p));
    return href.records(q);
  };

  return (
    <section>
      <PageTitle>Records</PageTitle>
      <form class="search" onSubmit={search} role="search" aria-label="Find transactions" key={query.toString()}>
        <div>
          <label for="id">Transaction id</label>
          <input id="id" name="id" spellcheck={false} />
        </div>
        <div>
          <label for="callerId">Caller</label>
          <input id="callerId" name="callerId" defaultValue={query.get('callerId') ?? ''} spellcheck={false} />
        </div>
        <div>
          <label for="outcome">Outcome</label>
          <select id="outcome" name="outcome">
            <option value="">any</option>
            {OUTCOMES.map((o) => (
              <option value={o} key={o} selected={query.get('outcome') === o}>
                {o}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="from">From (date)</label>
          <input id="from" name="from" type="date" defaultValue={query.get('from') ?? ''} />
        </div>
        <div>
          <label for="to">To (date)</label>
          <input id="to" name="to" type="date" defaultValue={query.get('to') ?? ''} />
        </div>
        <button type="submit">Find</button>
      </form>
      {error ? <Notice kind="error">{error}</Notice> : null}
      {result ? (
        <>
          <p class="muted" aria-live="polite">
            {result.total} transaction{result.total === 1 ? '' : 's'} found{result.total > 25 ? `; page ${result.page}` : ''}.
          </p>
          {result.items.length > 0 ? (
            <table class="records">
              <caption class="sr-only">Transactions, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Transaction</th>
                  <th scope="col">Caller</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {result.items.map((c) => (
                  <tr key={c.businessTransactionId}>
                    <td>
                      <a href={href.record(c.businessTransactionId)}>
                        <code>{c.businessTransactionId}</code>
                      </a>
                    </td>
                    <td>{c.callerId}</td>
                    <td>
                      <span class={`outcome ${c.outcome.toLowerCase()}`}>{c.outcome}</span>
                    </td>
                    <td>
                      <When at={c.createdAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          <nav class="pager" aria-label="Pages">
            {page > 1 ? <a href={pageLink(page - 1)}>Newer</a> : null}
            {page * 25 < result.total ? <a href={pageLink(page + 1)}>Older</a> : null}
          </nav>
        </>
      ) : null}
    </section>
  );
}

import { useEffect, useState } from 'preact/hooks';
import { listAll } from '../api';
import { KINDS, newestFirst, type InboxItem, type Kind } from '../kinds';
import { attended, REFRESH_MS } from '../attention';
import { href } from '../router';
import { errorText, Notice, PageTitle, untilText, When } from '../ui';

interface Loaded {
  items: InboxItem[];
  /** Kinds this server has no list of (404): it has none of them. */
  absent: Kind[];
  failed: { kind: Kind; error: string }[];
  at: Date;
}

async function loadInbox(): Promise<Loaded> {
  const results = await Promise.all(
    KINDS.map(async (kind) => {
      try {
        const raw = await listAll<Record<string, unknown>>(kind.pendingList);
        return { kind, items: raw?.map(kind.toItem), absent: raw === undefined };
      } catch (e) {
        return { kind, error: errorText(e) };
      }
    }),
  );
  return {
    items: results.flatMap((r) => ('items' in r && r.items ? r.items : [])).sort(newestFirst),
    absent: results.filter((r) => 'absent' in r && r.absent).map((r) => r.kind),
    failed: results.flatMap((r) => ('error' in r ? [{ kind: r.kind, error: r.error! }] : [])),
    at: new Date(),
  };
}

/**
 * Everything the signed-in person may decide, newest first, with deadlines; asks again every few
 * seconds. Proposals and requests of their own are listed too, marked as theirs (another person
 * decides them).
 */
export function Inbox({ me }: { me: string }) {
  const [loaded, setLoaded] = useState<Loaded | undefined>();
  const [error, setError] = useState<string | undefined>();

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async (): Promise<void> => {
      if (!attended()) {
        timer = setTimeout(tick, 1000);
        return;
      }
      try {
        const next = await loadInbox();
        if (!stopped) {
          setLoaded(next);
          setError(undefined);
        }
      } catch (e) {
        if (!stopped) setError(errorText(e));
      }
      if (!stopped) timer = setTimeout(tick, REFRESH_MS);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  return (
    <section>
      <PageTitle>Inbox</PageTitle>
      <p class="muted" aria-live="polite">
        {loaded ? (
          <>
            {loaded.items.length === 0 ? 'Nothing waits for a decision.' : `${loaded.items.length} waiting.`} Refreshed at{' '}
            <When at={loaded.at.toISOString()} />; it refreshes by itself while you are here.
          </>
        ) : (
          'Loading…'
        )}
      </p>
      {error ? <Notice kind="error">{error}</Notice> : null}
      {loaded?.failed.map((f) => (
        <Notice kind="error" key={f.kind.key}>
          The {f.kind.label}s could not be listed: {f.error}
        </Notice>
      ))}
      {loaded && loaded.items.length > 0 ? (
        <table class="inbox">
          <caption class="sr-only">Pending items, newest first</caption>
          <thead>
            <tr>
              <th scope="col">What</th>
              <th scope="col">Asked by</th>
              <th scope="col">Since</th>
              <th scope="col">Deadline</th>
            </tr>
          </thead>
          <tbody>
            {loaded.items.map((item) => (
              <tr key={`${item.kind}:${item.id}`} data-kind={item.kind} data-id={item.id}>
                <td>
                  <a href={href.item(item.kind, item.id)}>{item.title}</a>
                  {item.requester === me ? <span class="badge">yours</span> : null}
                  <div class="muted small">{item.summary}</div>
                </td>
                <td>{item.requester}</td>
                <td>
                  <When at={item.createdAt} />
                </td>
                <td>{item.deadline ? <span class="deadline">{untilText(item.deadline)}</span> : <span class="muted">none</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {loaded && loaded.absent.length > 0 ? (
        <p class="muted small">This service has no {loaded.absent.map((k) => `${k.label}s`).join(', ')}.</p>
      ) : null}
    </section>
  );
}

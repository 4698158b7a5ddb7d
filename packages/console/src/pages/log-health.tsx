import { useEffect, useState } from 'preact/hooks';
import { verifyLogCheckpoint, verifyLogConsistency } from '@ets/client';
import { call, errorOf, getText } from '../api';
import { Check, errorText, Facts, Notice, PageTitle, When } from '../ui';
import { publishedKeys } from '../verify';

/** Where this browser keeps the last checkpoint it saw (checkpoints are public). */
export const LAST_CHECKPOINT_KEY = 'ets-console.last-checkpoint';

interface Seen {
  note: string;
  treeSize: number;
  seenAt: string;
}

interface Health {
  origin: string;
  treeSize: number;
  rootHex: string;
  signedBy: string[];
  note: string;
  /** The checkpoint this browser saw before, if any. */
  previous?: Seen;
  /** undefined: nothing to compare with (first visit). */
  consistent?: boolean;
  errors: string[];
}

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

function lastSeen(): Seen | undefined {
  try {
    const v = JSON.parse(localStorage.getItem(LAST_CHECKPOINT_KEY) ?? 'null') as Seen | null;
    return v && typeof v.note === 'string' && typeof v.treeSize === 'number' ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The current signed checkpoint, checked against the service's keys, and against the checkpoint
 * this browser saw last (RFC 9162 consistency proof): a log rewritten behind a visitor's back is
 * an alarm. The checkpoint kept is replaced only by one proved to extend it.
 */
async function checkHealth(): Promise<Health> {
  const keys = await publishedKeys();
  const note = await getText('/log/checkpoint');
  const opened = verifyLogCheckpoint(note, keys);
  if (!opened.ok) throw new Error(`The current checkpoint does not verify with the service's keys: ${opened.errors.join('; ')}`);
  const cp = opened.checkpoint;
  const health: Health = { origin: cp.origin, treeSize: cp.treeSize, rootHex: hex(cp.rootHash), signedBy: cp.signedBy, note, errors: [] };
  const previous = lastSeen();
  if (previous) {
    health.previous = previous;
    let hashes: unknown = [];
    if (previous.treeSize > 0 && previous.treeSize < cp.treeSize) {
      const proof = await call<{ hashes: string[] }>('GET', `/log/proof/consistency?from=${previous.treeSize}&to=${cp.treeSize}`);
      if (proof.status !== 200) throw new Error(`No consistency proof: ${errorOf(proof).message}`);
      hashes = proof.body.hashes;
    }
    const checked = verifyLogConsistency(previous.note, note, hashes, keys);
    health.consistent = checked.ok;
    health.errors = checked.ok ? [] : checked.errors;
  }
  if (health.consistent !== false) localStorage.setItem(LAST_CHECKPOINT_KEY, JSON.stringify({ note, treeSize: cp.treeSize, seenAt: new Date().toISOString() } satisfies Seen));
  return health;
}

export function LogHealth() {
  const [health, setHealth] = useState<Health | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    checkHealth().then(setHealth, (e) => setError(errorText(e)));
  }, []);
  return (
    <section>
      <PageTitle>Log health</PageTitle>
      <p>
        Every signed record is a leaf of the service's append-only transparency log. This page checks the log's current signed checkpoint
        and that it extends the one this browser saw last: a log that was rewritten is noticed by any visitor.
      </p>
      {error ? <Notice kind="alarm">{error}</Notice> : null}
      {!health && !error ? <p class="muted">Checking…</p> : null}
      {health ? (
        <>
          {health.consistent === false ? (
            <Notice kind="alarm">
              <strong data-testid="log-alarm">ALARM: the log is not consistent with the checkpoint this browser saw before.</strong> The service's history
              was rewritten, rolled back or forked. Keep this page's evidence and tell your security team. {health.errors.join('; ')}
            </Notice>
          ) : health.consistent ? (
            <Notice kind="ok">
              <span data-testid="log-ok">
                Consistent: the log of {health.treeSize} leaves extends the one of {health.previous!.treeSize} leaves this browser saw <When at={health.previous!.seenAt} />.
              </span>
            </Notice>
          ) : (
            <Notice kind="info">
              <span data-testid="log-first">First visit from this browser: this checkpoint is kept, and the next visit checks that the log extends it.</span>
            </Notice>
          )}
          <ul class="checks">
            <Check name="checkpoint signature" ok={true} detail={`signed by ${health.signedBy.join(', ')}`} />
            {health.consistent !== undefined ? <Check name="consistency with the last seen checkpoint" ok={health.consistent} detail={health.errors.join('; ') || undefined} /> : null}
          </ul>
          <Facts
            rows={[
              ['Origin', <code>{health.origin}</code>],
              ['Tree size', <span data-testid="tree-size">{health.treeSize}</span>],
              ['Root hash', <code class="hash">{health.rootHex}</code>],
            ]}
          />
          <details>
            <summary>The signed checkpoint</summary>
            <pre class="json" tabIndex={0}>
              <code>{health.note}</code>
            </pre>
          </details>
        </>
      ) : null}
    </section>
  );
}

/** Small pieces every page uses. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

/** A page's title: focused when the page opens, so a keyboard or screen-reader user starts there. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <h1 ref={ref} tabIndex={-1}>
      {children}
    </h1>
  );
}

export function Json({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre class="json" tabIndex={0} aria-label={label}>
      <code>{JSON.stringify(value, null, 2)}</code>
    </pre>
  );
}

/** A time as the person's clock shows it, with the exact value in the tooltip. */
export function When({ at }: { at: string | undefined }) {
  if (!at) return <span>—</span>;
  const d = new Date(at);
  return (
    <time dateTime={at} title={at}>
      {Number.isNaN(d.getTime()) ? at : d.toLocaleString()}
    </time>
  );
}

/** How long until `at`, in words; "passed" once it has. */
export function untilText(at: string, now = Date.now()): string {
  const ms = Date.parse(at) - now;
  if (Number.isNaN(ms)) return '';
  if (ms <= 0) return 'passed';
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return `in ${Math.max(1, Math.round(ms / 1000))} s`;
  if (minutes < 120) return `in ${minutes} min`;
  return `in ${Math.round(minutes / 60)} h`;
}

export function Notice({ kind, children }: { kind: 'ok' | 'error' | 'info' | 'alarm'; children: ComponentChildren }) {
  return (
    <div class={`notice ${kind}`} role={kind === 'error' || kind === 'alarm' ? 'alert' : 'status'}>
      {children}
    </div>
  );
}

/** A two-column list of facts. */
export function Facts({ rows }: { rows: [string, ComponentChildren][] }) {
  return (
    <dl class="facts">
      {rows.map(([name, value]) => (
        <div key={name}>
          <dt>{name}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

/** One check of a verification, passed or failed, with what it says. */
export function Check({ name, ok, detail }: { name: string; ok: boolean; detail?: string }) {
  return (
    <li class={ok ? 'check ok' : 'check failed'} data-check={name} data-ok={String(ok)}>
      <span class="mark" aria-hidden="true">
        {ok ? '✓' : '✗'}
      </span>
      <strong>{name}</strong> <span class="sr-only">{ok ? 'passed' : 'failed'}</span>
      {detail ? <span class="detail"> — {detail}</span> : null}
    </li>
  );
}

export const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

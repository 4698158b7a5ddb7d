import { diffLines } from 'diff';

interface Row {
  left?: string;
  right?: string;
  change: 'same' | 'removed' | 'added' | 'changed';
}

const linesOf = (text: string): string[] => text.replace(/\n$/, '').split('\n');

/** Lines of the two texts side by side: a removed run next to the added run that replaces it. */
export function sideBySide(before: string, after: string): Row[] {
  const rows: Row[] = [];
  const parts = diffLines(before, after);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const lines = linesOf(part.value);
    if (!part.added && !part.removed) {
      for (const l of lines) rows.push({ left: l, right: l, change: 'same' });
    } else if (part.removed && parts[i + 1]?.added) {
      const added = linesOf(parts[++i]!.value);
      for (let j = 0; j < Math.max(lines.length, added.length); j++) rows.push({ left: lines[j], right: added[j], change: 'changed' });
    } else {
      for (const l of lines) rows.push(part.removed ? { left: l, change: 'removed' } : { right: l, change: 'added' });
    }
  }
  return rows;
}

/**
 * The proposed policy document beside the version in effect, line by line (the documents as
 * stored, laid out as JSON): what a checker approves, not a summary of it.
 */
export function PolicyDiff({ before, after, beforeLabel, afterLabel }: { before: unknown; after: unknown; beforeLabel: string; afterLabel: string }) {
  const rows = sideBySide(before === undefined ? '' : JSON.stringify(before, null, 2), JSON.stringify(after, null, 2));
  const changed = rows.filter((r) => r.change !== 'same').length;
  return (
    <div class="diff-wrap" tabIndex={0} role="region" aria-label={`Differences between ${beforeLabel} and ${afterLabel}`}>
      <p class="small muted">{changed === 0 ? 'No line differs.' : `${changed} line${changed === 1 ? '' : 's'} differ.`}</p>
      <table class="diff">
        <caption class="sr-only">
          {beforeLabel} on the left, {afterLabel} on the right; changed lines are marked
        </caption>
        <thead>
          <tr>
            <th scope="col">{beforeLabel}</th>
            <th scope="col">{afterLabel}</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i} class={r.change} data-change={r.change}>
              <td class={r.left === undefined ? 'empty' : r.change === 'same' ? '' : 'del'}>
                {r.change !== 'same' && r.left !== undefined ? <span class="sr-only">removed: </span> : null}
                <code>{r.left ?? ''}</code>
              </td>
              <td class={r.right === undefined ? 'empty' : r.change === 'same' ? '' : 'ins'}>
                {r.change !== 'same' && r.right !== undefined ? <span class="sr-only">added: </span> : null}
                <code>{r.right ?? ''}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

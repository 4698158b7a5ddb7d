import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { EXPORT_FORMAT, type ExportHeader } from '@ets/adapters-crypto';
import { createDataSource, describeTarget, EXPORT_KINDS, leafOfBody, MIGRATIONS, SignedRecordExport, TypeOrmTransparencyLog, type ExportPeriod } from '@ets/adapters-persistence';
import type { DataSource } from 'typeorm';
import { loadSettings } from '../config/settings.js';
import { storageTargetFor } from '../storage-target.js';
import { CliError } from './errors.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('export');
const PROGRESS_EVERY = 2000;

/**
 * `ets export [--since DATE] [--until DATE] > records.jsonl`: a run of the transparency log with
 * every signed record in it, as JSON Lines on stdout, from the database the server's settings name
 * (SVC_DATABASE_URL / SVC_DATA_DIR), opened read-only, in one snapshot, page by page (constant
 * memory). Progress and a summary go to stderr.
 *
 * The first line is the header `{"export": {format, checkpoint, period?, leaves}}`: the newest
 * signed checkpoint of the log (CONTRACT "Transparency log") and the run of its leaves the file
 * holds: all of them (`0..treeSize-1`), or for a period the leaves from the first to the last of a
 * record stamped in it. Then one `{"kind", "record", "transparency"}` per leaf, in leaf order: the
 * record exactly as signed and its inclusion proof in that checkpoint. `ets verify --all` checks
 * every record and that the lines are exactly that run, each leaf once and in order. Leaves
 * committed after the checkpoint (the server signs one at most every second) are left for the next
 * export, and counted.
 */
export async function exportCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { since: { type: 'string' }, until: { type: 'string' } }, allowPositionals: true, strict: true });
  if (positionals.length > 0) throw new CliError(`unexpected argument ${JSON.stringify(positionals[0])}. ${USAGE}`, 2);
  const period: ExportPeriod = { since: dateOption('--since', values.since), until: dateOption('--until', values.until) };
  if (period.since !== undefined && period.until !== undefined && period.since >= period.until) throw new CliError('--since must be before --until.', 2);

  const settings = loadSettings();
  const target = storageTargetFor(settings);
  if (target.kind === 'sqlite' && !existsSync(target.file)) {
    throw new CliError(`no database at ${target.file} (set SVC_DATA_DIR, or SVC_DATABASE_URL for PostgreSQL, as for the server).`, 2);
  }
  const ds = createDataSource(target, { readOnly: true });
  try {
    await ds.initialize();
  } catch (e) {
    throw new CliError(`cannot open ${describeTarget(target)}: ${(e as Error).message}`, 2);
  }
  try {
    await requireCurrentSchema(ds);
    const log = new TypeOrmTransparencyLog(ds);
    const damaged = await SignedRecordExport.snapshot(ds, async (reader) => {
      const checkpoint = await reader.checkpoint();
      if (!checkpoint) throw new CliError('the transparency log has no signed checkpoint yet: start the server once (it signs one at start), then export.', 2);
      const run = await reader.run(checkpoint.treeSize, period);
      const selected = period.since !== undefined || period.until !== undefined;
      const header: ExportHeader = {
        format: EXPORT_FORMAT,
        checkpoint: checkpoint.note,
        ...(selected ? { period: { ...(period.since ? { since: period.since } : {}), ...(period.until ? { until: period.until } : {}) } } : {}),
        leaves: run,
      };
      await write(`${JSON.stringify({ export: header })}\n`);
      const counts = run ? await reader.counts(run) : {};
      const total = run ? run.last - run.first + 1 : 0;
      process.stderr.write(
        `ets export: ${run ? `leaves ${run.first}..${run.last}` : 'no leaf'} of the checkpoint of ${checkpoint.treeSize} leaves of ${checkpoint.origin} ${describePeriod(period)} from ${describeTarget(target)}\n`,
      );
      const problems = { missing: 0, changed: 0 };
      let written = 0;
      if (run) {
        for await (const leaf of reader.leaves(run)) {
          // A leaf whose record the database lost, or holds changed, is reported; the file then does not verify.
          if (leaf.body === undefined) {
            problems.missing++;
            process.stderr.write(`ets export: leaf ${leaf.leafIndex} (${leaf.kind} ${leaf.id}): the database no longer holds its record\n`);
            continue;
          }
          if (leafOfBody(leaf.body) !== leaf.leaf) {
            problems.changed++;
            process.stderr.write(`ets export: leaf ${leaf.leafIndex} (${leaf.kind} ${leaf.id}): the stored record is not the one logged\n`);
          }
          const proof = await log.inclusionProofAt(leaf.leafIndex, checkpoint.treeSize);
          await write(`{"kind":"${leaf.kind}","record":${leaf.body},"transparency":${JSON.stringify({ ...proof, checkpoint: checkpoint.note })}}\n`);
          if (++written % PROGRESS_EVERY === 0) process.stderr.write(`ets export: ${written}/${total}\n`);
        }
      }
      const newer = await reader.newerThan(checkpoint.treeSize);
      process.stderr.write(
        `ets export: done, ${written} records: ${EXPORT_KINDS.filter((k) => (counts[k] ?? 0) > 0).map((k) => `${counts[k]} ${k}`).join(', ') || 'none'}\n` +
          (newer > 0 ? `ets export: ${newer} leaves committed after that checkpoint are not in this export (the next checkpoint holds them)\n` : ''),
      );
      return problems;
    });
    if (damaged.missing + damaged.changed > 0) {
      throw new CliError(`${damaged.missing} leaves without their record and ${damaged.changed} records changed since they were logged: the database was changed; the export will not verify.`, 1);
    }
  } finally {
    await ds.destroy();
  }
}

async function write(text: string): Promise<void> {
  if (!process.stdout.write(text)) await once(process.stdout, 'drain');
}

/** The export reads columns of the latest migrations: an older database must be started by this version once. */
async function requireCurrentSchema(ds: DataSource): Promise<void> {
  let applied: string[];
  try {
    applied = ((await ds.query('SELECT name FROM migrations')) as { name: string }[]).map((r) => r.name);
  } catch {
    applied = [];
  }
  const missing = MIGRATIONS.map((m) => new m().name).filter((n) => !applied.includes(n));
  if (missing.length > 0) {
    throw new CliError(`the database lacks ${missing.length} migration(s) of this version (${missing.join(', ')}): start the server of this version on it once, then export.`, 2);
  }
}

/** RFC 3339: a date (midnight UTC) or a date-time with an offset; stored times are UTC ISO strings, compared as text. */
function dateOption(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const ok = /^\d{4}-\d{2}-\d{2}$/.test(value) || /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.test(value);
  const time = ok ? Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value) : NaN;
  if (Number.isNaN(time)) throw new CliError(`${flag} ${JSON.stringify(value)}: give a date (2025-11-01) or a date-time with its offset (2025-11-01T12:00:00Z).`, 2);
  return new Date(time).toISOString();
}

function describePeriod(p: ExportPeriod): string {
  if (p.since === undefined && p.until === undefined) return '(all)';
  return `from ${p.since ?? 'the beginning'} until ${p.until ?? 'now'}`;
}

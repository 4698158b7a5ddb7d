import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { backupSqliteDatabase } from '@ets/adapters-persistence';
import { loadSettings } from '../config/settings.js';
import { storageTargetFor } from '../storage-target.js';
import { CliError } from './errors.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('backup');

/**
 * `ets backup FILE`: a consistent copy of the embedded SQLite database, taken while the server
 * runs (SQLite's online backup API), then checked (`integrity_check`). PostgreSQL deployments use
 * `pg_dump` (the operator guide, "Deployment"), which this command names instead of copying.
 */
export async function backupCommand(argv: string[]): Promise<void> {
  const { positionals } = parseArgs({ args: argv, options: {}, allowPositionals: true, strict: true });
  if (positionals.length !== 1 || positionals[0] === '') throw new CliError(`${positionals.length === 0 ? 'FILE is required. ' : ''}${USAGE}`, 2);
  const destination = path.resolve(positionals[0]!);
  const target = storageTargetFor(loadSettings());
  if (target.kind === 'postgres') {
    throw new CliError('SVC_DATABASE_URL names PostgreSQL: back it up with pg_dump, e.g. pg_dump --format=custom --file=ets.dump "$SVC_DATABASE_URL" (restore: pg_restore --dbname=NEW_DATABASE_URL ets.dump).', 2);
  }
  if (!existsSync(target.file)) throw new CliError(`no database at ${target.file} (set SVC_DATA_DIR as for the server).`, 2);
  if (existsSync(destination)) throw new CliError(`${destination} exists already: name a new file.`, 2);
  let report;
  try {
    report = await backupSqliteDatabase(target.file, destination);
  } catch (e) {
    throw new CliError(`backup of ${target.file} failed: ${(e as Error).message}`, 1);
  }
  const rows = Object.entries(report.rows).map(([t, n]) => `${n} ${t}`).join(', ');
  process.stdout.write(`backed up ${target.file} to ${destination}: ${report.pages} pages; ${rows}\nintegrity check of the copy: ${report.integrity}\n`);
  if (report.integrity !== 'ok') throw new CliError(`the copy ${destination} did not pass the integrity check.`, 1);
}

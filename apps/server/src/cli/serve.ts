import { parseArgs } from 'node:util';
import { loadSettings } from '../config/settings.js';
import { createLogger } from '../logger.js';
import { installRootWord } from '../install-root.js';
import type { Logger } from '@ets/domain';
import { startServer, type IssuedFirstKey, type RunningServer } from '../server.js';
import { stopWhenParentExits } from './parent-watch.js';

/**
 * `ets serve`: what `npm start` runs. Stops gracefully on SIGTERM and SIGINT, and with
 * `--exit-with-parent` also when the process that started it goes away.
 */
export async function serveCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { 'exit-with-parent': { type: 'boolean' } }, strict: true });
  const settings = loadSettings();
  const logger = createLogger(settings.logLevel);
  const lifecycle = stopOnSignals(logger);
  lifecycle.started(await startServer(settings, logger, { onFirstKey: printFirstKey }));
  // `npm start` execs the server in place of its shell, so npm is the parent and forwards SIGTERM
  // and SIGINT. If npm itself is killed outright (SIGKILL, a container or unit stopping it) the
  // server is re-parented; it then stops as if it had been sent SIGTERM, instead of living on.
  if (values['exit-with-parent']) stopWhenParentExits(() => lifecycle.stop('parent exited'));
}

/**
 * Stops the server gracefully on SIGTERM and SIGINT, then exits the process (`afterStop` runs
 * first). Call it before the start and hand it the server once it runs: a signal that came before
 * the handlers would end the process with the default action, half started (a supervisor may stop
 * a server the moment it says it listens), so a signal during the start is kept until then.
 */
export function stopOnSignals(logger: Logger, afterStop?: () => void): { started(running: RunningServer): void; stop(reason: string): void } {
  let running: RunningServer | undefined;
  let requested: string | undefined;
  let stopping = false;
  const stop = (reason: string) => {
    if (!running) {
      requested ??= reason;
      return;
    }
    if (stopping) return;
    stopping = true;
    logger.info({ signal: reason }, 'shutting down');
    running.close().then(
      () => {
        afterStop?.();
        process.exit(0);
      },
      (e: unknown) => {
        logger.error({ err: String(e) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  return {
    started(server) {
      running = server;
      if (requested) stop(requested);
    },
    stop,
  };
}

/** Printed once, on stderr beside the logs, never into them: the raw key is not stored anywhere. */
function printFirstKey(k: IssuedFirstKey): void {
  process.stderr.write(
    `\nNo API key was configured, so one USER key was issued for caller '${k.callerId}' (all capabilities):\n\n` +
      `    ${k.rawKey}\n\n` +
      `It is shown only this once; only its SHA-256 hash is kept in ${k.file}.\n` +
      `Use it as 'Authorization: Bearer <key>' (e.g. curl -H 'Authorization: Bearer ${k.rawKey.slice(0, 12)}…' …/callers/me).\n` +
      `Requests with it assert authority.principalId '${k.callerId}'. Add more keys with 'npx ets keys add --caller-id ID' in the clone's root, and restart;\n` +
      // Outside the clone `npx ets` is an unrelated registry package of that name.
      `from any other folder: npm --prefix ${installRootWord()} run --silent ets -- keys add --caller-id ID\n` +
      `Lost it while it is the only key? Stop the server, delete ${k.file} and start again: a new one is issued.\n\n`,
  );
}

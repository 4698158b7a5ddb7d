import { loadSettings } from '../config/settings.js';
import { createLogger } from '../logger.js';
import { startServer } from '../server.js';

/** `ets serve`: what `npm start` runs. Stops gracefully on SIGTERM and SIGINT. */
export async function serveCommand(): Promise<void> {
  const settings = loadSettings();
  const logger = createLogger(settings.logLevel);
  const running = await startServer(settings, logger);
  if (running.issuedFirstKey) {
    // Printed once, on stderr beside the logs, never into them: it is not stored anywhere.
    const k = running.issuedFirstKey;
    process.stderr.write(
      `\nNo API key was configured, so one USER key was issued for caller '${k.callerId}' (all capabilities):\n\n` +
        `    ${k.rawKey}\n\nIt is shown only this once; only its SHA-256 hash is kept in ${k.file}.\n` +
        `Use it as 'Authorization: Bearer <key>'. Add more keys with 'npx ets keys add --caller-id ID' and restart.\n\n`,
    );
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    running.close().then(
      () => process.exit(0),
      (e: unknown) => {
        logger.error({ err: String(e) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

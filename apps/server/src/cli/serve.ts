import { loadSettings } from '../config/settings.js';
import { createLogger } from '../logger.js';
import { startServer } from '../server.js';

/** `ets serve`: what `npm start` runs. Stops gracefully on SIGTERM and SIGINT. */
export async function serveCommand(): Promise<void> {
  const settings = loadSettings();
  const logger = createLogger(settings.logLevel);
  const running = await startServer(settings, logger);
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

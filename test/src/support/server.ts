import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadSettings, startServer, type RunningServer, type Settings } from '@ets/server';
import { silentLogger } from '@ets/domain';
import type { ProvisionedTarget, TargetFactory } from './databases.js';
import { takeResponseProblems } from './openapi-responses.js';

export interface TestServer extends RunningServer {
  settings: Settings;
  dataDir: string;
  db: ProvisionedTarget;
  /** Closes the server, drops its database and removes its data dir. */
  destroy(): Promise<void>;
}

/**
 * An in-process server on an ephemeral port, on the given store, with a fresh data dir. Every
 * response it gives is checked against the OpenAPI document of its profile (validated-server.ts).
 */
export async function startTestServer(factory: TargetFactory, env: Record<string, string> = {}): Promise<TestServer> {
  const db = await factory.provision();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-data-'));
  const settings = loadSettings({
    SVC_PORT: '0',
    SVC_DATA_DIR: dataDir,
    SVC_LOG_LEVEL: 'silent',
    ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}),
    ...env,
  });
  if (db.target.kind === 'sqlite') settings.dataDir = path.dirname(db.target.file);
  // In jest `@ets/server` is validated-server.ts: its startServer checks every response.
  const running = await startServer(settings, silentLogger);
  return { ...running, settings, dataDir, db, destroy: destroyer(running, db, dataDir) };
}

/**
 * Stops `server` the way `ets serve` stops (its database and data dir are kept) and starts it again
 * on them with the same settings: what a restart of the process sees.
 */
export async function restartTestServer(server: TestServer): Promise<TestServer> {
  await server.close();
  const running = await startServer(server.settings, silentLogger);
  return { ...running, settings: server.settings, dataDir: server.dataDir, db: server.db, destroy: destroyer(running, server.db, server.dataDir) };
}

function destroyer(running: RunningServer, db: ProvisionedTarget, dataDir: string): () => Promise<void> {
  return async () => {
    await running.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
    // Responses of afterAll hooks come after the last test's check.
    const problems = takeResponseProblems();
    if (problems.length > 0) throw new Error(`Responses not as the OpenAPI document says:\n- ${problems.join('\n- ')}`);
  };
}

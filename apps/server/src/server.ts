import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { createDataSource, describeTarget, migrate, type StorageTarget } from '@ets/adapters-persistence';
import { KeyRing } from '@ets/adapters-crypto';
import type { HttpApp, RateLimiters } from '@ets/adapters-http';
import type { ExecutionService, ExecutionStore, Logger, PolicyGovernance } from '@ets/domain';
import type { Container } from 'inversify';
import type { Settings } from './config/settings.js';
import { buildContainer } from './container.js';
import { readBuildId } from './build-info.js';
import { TOKENS } from './tokens.js';
import { issueFirstKeyIfNone } from './keys/key-source.js';
import { proposeShippedPolicies, SHIPPED_POLICIES_DIR } from './shipped-policies.js';

export interface RunningServer {
  url: string;
  httpApp: HttpApp;
  dataSource: DataSource;
  keyRing: KeyRing;
  /** The raw key issued on a first start with no key configured: print it once, store it nowhere. */
  issuedFirstKey?: { callerId: string; rawKey: string; file: string };
  /** Stops accepting, lets in-flight requests finish, closes the database. */
  close(): Promise<void>;
}

export function storageTargetFor(settings: Settings): StorageTarget {
  return settings.databaseUrl
    ? { kind: 'postgres', url: settings.databaseUrl }
    : { kind: 'sqlite', file: path.join(settings.dataDir, 'ets.sqlite') };
}

/** Opens storage, applies migrations, wires the container and listens. */
export async function startServer(settings: Settings, logger: Logger): Promise<RunningServer> {
  mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
  // Keys and signing keys first: a bad key file or missing hybrid key stops the start before any I/O.
  const keys = issueFirstKeyIfNone(settings);
  const keyRing = await KeyRing.open({ dataDir: settings.dataDir, mode: settings.signingMode });
  if (settings.authDisabled) {
    logger.warn({ setting: 'SVC_AUTH_DISABLED' }, 'caller authentication is DISABLED: every request is accepted without a key; never run a real deployment like this');
  }
  const target = storageTargetFor(settings);
  const dataSource = createDataSource(target);
  await dataSource.initialize();
  try {
    const applied = await migrate(dataSource);
    logger.info({ storage: describeTarget(target), applied }, 'storage ready');

    const container = buildContainer({ settings, logger, dataSource, buildId: readBuildId(), keyRing, apiKeys: keys.records });
    await proposeShippedPolicies(settings.policiesDir ?? SHIPPED_POLICIES_DIR, container.get<PolicyGovernance>(TOKENS.PolicyGovernance), logger);
    await reconcileAtStart(container, logger);
    const httpApp = container.get<HttpApp>(TOKENS.HttpApp);
    const server = await listen(httpApp, settings);
    const { address, port } = server.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    const url = `http://${host}:${port}`;
    logger.info({ url, profile: settings.profile, signingKeys: keyRing.activeKeyIds, callers: keys.records.length }, 'listening');

    let closing: Promise<void> | undefined;
    const close = (): Promise<void> =>
      (closing ??= (async () => {
        await stopAccepting(server, settings.shutdownTimeoutMs);
        await container.get<RateLimiters>(TOKENS.RateLimiters).close();
        await dataSource.destroy();
        logger.info({}, 'stopped');
      })());
    const issuedFirstKey = keys.issuedRawKey ? { callerId: keys.callerId!, rawKey: keys.issuedRawKey, file: settings.apiKeysFile } : undefined;
    return { url, httpApp, dataSource, keyRing, issuedFirstKey, close };
  } catch (e) {
    await dataSource.destroy().catch(() => undefined);
    throw e;
  }
}

/**
 * Crash recovery: an intent a crash left RELEASED gets its Trust Record from the saved release
 * context; PREPARED and ERRORED intents are reported for reconciliation (GET /execution-intents).
 */
async function reconcileAtStart(container: Container, logger: Logger): Promise<void> {
  const finalized = await container.get<ExecutionService>(TOKENS.ExecutionService).recoverReleased();
  const open = await container.get<ExecutionStore>(TOKENS.ExecutionStore).listIntents(['PREPARED', 'ERRORED'], 1000);
  if (finalized > 0) logger.info({ finalized }, 'finalized intents left RELEASED by an earlier stop');
  if (open.length > 0) {
    logger.warn(
      { count: open.length, ids: open.slice(0, 20).map((i) => i.intent.businessTransactionId) },
      'execution intents need reconciliation at their connector (GET /execution-intents, POST /execution-intents/{id}/resolve)',
    );
  }
}

function listen(httpApp: HttpApp, settings: Settings): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = httpApp.app.listen(settings.port, settings.host);
    server.once('listening', () => resolve(server));
    server.once('error', reject);
    // Keep-alive sockets must not hold shutdown open longer than the in-flight requests need.
    server.keepAliveTimeout = 5000;
  });
}

/** Close the listener, let in-flight requests finish, then drop idle and (after the timeout) busy sockets. */
function stopAccepting(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

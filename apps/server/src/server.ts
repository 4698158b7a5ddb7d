import { mkdirSync } from 'node:fs';
import type { DataSource } from 'typeorm';
import { countIntentsByState, createDataSource, describeTarget, migrate, TypeOrmPublishedKeyStore, type TypeOrmAttestationStore } from '@ets/adapters-persistence';
import { ServiceSigningKeys, type KeyProvider } from '@ets/adapters-crypto';
import type { HttpApp, RateLimiters } from '@ets/adapters-http';
import type { HttpsEgress, McpUpstreamPool } from '@ets/adapters-connectors';
import { EVERY_CALLER, type AttestationRuntime, type CheckpointPublisher, type ExecutionService, type ExecutionStore, type HeldTransactions, type Logger, type NoticeDelivery, type PolicyGovernance } from '@ets/domain';
import type { Container } from 'inversify';
import { ConfigError, type Settings } from './config/settings.js';
import { buildContainer } from './container.js';
import { readBuildId } from './build-info.js';
import { TOKENS } from './tokens.js';
import { keyRecordsForStart, persistFirstKey } from './keys/key-source.js';
import { proposeShippedPolicies, SHIPPED_POLICIES_DIR } from './shipped-policies.js';
import { runningCode } from './runtime/running-code.js';
import { scheduleCheckpoints } from './runtime/checkpoint-schedule.js';
import { scheduleNoticeDelivery, type NoticeSchedule } from './runtime/notice-schedule.js';
import { scheduleHeldExpiry } from './runtime/held-expiry.js';
import { openKeyProvider } from './signing/key-provider.js';
import { storageTargetFor } from './storage-target.js';
import { ServiceMetrics } from './metrics/service-metrics.js';
import { ConnectionTracker, drainHttp } from './http-drain.js';
import { bindPorts } from './listen-first.js';

export { storageTargetFor };

export interface RunningServer {
  url: string;
  /** `http://host:port/metrics` when SVC_METRICS_PORT is set. */
  metricsUrl?: string;
  httpApp: HttpApp;
  dataSource: DataSource;
  /** The service's signing keys, whatever provider holds them, and the published key set. */
  signingKeys: ServiceSigningKeys;
  /** The raw key issued on a first start with no key configured: print it once, store it nowhere. */
  issuedFirstKey?: IssuedFirstKey;
  /**
   * Stops accepting, answers the requests that arrive on open connections (with `Connection:
   * close`), lets every running request finish, then closes the database (http-drain.ts).
   */
  close(): Promise<void>;
}

export interface IssuedFirstKey {
  callerId: string;
  rawKey: string;
  /** The key file that holds its hash. */
  file: string;
}

export interface StartHooks {
  /**
   * Called once the server listens and the first key's hash is stored, before the `listening` log
   * line: the moment to show the key, since from now on it works.
   */
  onFirstKey?(key: IssuedFirstKey): void;
}

/**
 * Takes the port, then opens storage, applies migrations, wires the container and serves. The port
 * comes first (listen-first.ts): a start that cannot listen writes nothing, neither to the data dir
 * nor to a database another instance serves.
 */
export async function startServer(settings: Settings, logger: Logger, hooks: StartHooks = {}): Promise<RunningServer> {
  // Read only: a bad key file stops the start before the port is taken.
  const keys = keyRecordsForStart(settings);
  if (settings.authDisabled) {
    logger.warn({ setting: 'SVC_AUTH_DISABLED' }, 'caller authentication is DISABLED: every request is accepted without a key; never run a real deployment like this');
  }
  if (settings.egress.allowCidrs.length > 0) {
    logger.warn(
      { setting: 'SVC_EGRESS_ALLOW_CIDRS', ranges: settings.egress.allowCidrs },
      'outbound calls may reach these non-public address ranges: endpoints that resolve into them are not refused; keep this to a private-network deployment',
    );
  }
  const target = storageTargetFor(settings);
  // Not connected yet: TypeORM opens it in initialize().
  const dataSource = createDataSource(target);
  const metrics = settings.metrics ? new ServiceMetrics(() => countIntentsByState(dataSource)) : undefined;
  const ports = await bindPorts(settings, metrics);
  const { server, url } = ports;
  const connections = new ConnectionTracker(server);
  let keyProvider: KeyProvider | undefined;
  try {
    mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
    // Signing keys before storage: a missing hybrid key or a module that cannot be used stops the
    // start before any storage I/O (a first start generates the keys here).
    keyProvider = await openKeyProvider(settings);
    await dataSource.initialize();
    const applied = await migrate(dataSource);
    logger.info({ storage: describeTarget(target), applied }, 'storage ready');
    // Published before anything is signed, so every key that signs stays in the JWKS.
    const signingKeys = await ServiceSigningKeys.open(keyProvider, { store: new TypeOrmPublishedKeyStore(dataSource), logger });

    const buildId = readBuildId();
    const container = buildContainer({ settings, logger, dataSource, buildId, signingKeys, apiKeys: keys.records, metrics });
    // Before anything is signed: a database restored from a backup would fork the published log.
    const logProblem = await container.get<CheckpointPublisher>(TOKENS.CheckpointPublisher).continuityProblem();
    if (logProblem) throw new ConfigError(logProblem);
    await startRuntime(container.get<AttestationRuntime>(TOKENS.AttestationRuntime), buildId, logger);
    await proposeShippedPolicies(settings.policiesDir ?? SHIPPED_POLICIES_DIR, container.get<PolicyGovernance>(TOKENS.PolicyGovernance), logger);
    await reconcileAtStart(container, logger);
    const checkpoints = await scheduleCheckpoints(container.get<CheckpointPublisher>(TOKENS.CheckpointPublisher), logger);
    // Delivers what is due, what an earlier run left undelivered included.
    const notices: NoticeSchedule | undefined = settings.notifications ? scheduleNoticeDelivery(container.get<NoticeDelivery>(TOKENS.NoticeDelivery), logger) : undefined;
    if (settings.notifications) {
      // Hosts only: a webhook URL's path may be a credential.
      logger.info({ hosts: settings.notifications.endpoints.map((e) => new URL(e).host), publicUrl: settings.publicUrl }, 'new pending items are announced to webhooks');
    }
    // Silence is never consent: held transactions whose time ran out are refused (an earlier run's too).
    const heldExpiry = scheduleHeldExpiry(container.get<HeldTransactions>(TOKENS.HeldTransactions), logger);
    const httpApp = container.get<HttpApp>(TOKENS.HttpApp);
    ports.serve(httpApp.app);
    const provider = keyProvider;

    let closing: Promise<void> | undefined;
    const close = (): Promise<void> =>
      (closing ??= (async () => {
        await drainHttp(server, connections, httpApp, settings.shutdownTimeoutMs, logger);
        await heldExpiry.stop();
        await notices?.stop();
        await checkpoints.stop();
        await ports.metrics?.close();
        await container.get<RateLimiters>(TOKENS.RateLimiters).close();
        // Ends the upstream MCP sessions and the stdio servers' processes.
        await container.get<McpUpstreamPool>(TOKENS.McpUpstreams).close();
        // After the last outbound call (the MCP sessions' ends included): the kept connections.
        container.get<HttpsEgress>(TOKENS.HttpsEgress).close();
        await container.get<TypeOrmAttestationStore>(TOKENS.AttestationStore).close();
        await dataSource.destroy();
        await provider.close();
        logger.info({}, 'stopped');
      })());
    let issuedFirstKey: IssuedFirstKey | undefined;
    if (keys.firstKey) {
      try {
        persistFirstKey(settings, keys.firstKey);
      } catch (e) {
        await close();
        throw e;
      }
      issuedFirstKey = { callerId: keys.firstKey.record.callerId, rawKey: keys.firstKey.rawKey, file: settings.apiKeysFile };
      hooks.onFirstKey?.(issuedFirstKey);
    }
    logger.info(
      {
        url,
        ...(ports.metrics ? { metricsUrl: ports.metrics.url } : {}),
        pid: process.pid,
        profile: settings.profile,
        signingProvider: signingKeys.provider,
        signingKeys: signingKeys.activeKeyIds,
        callers: keys.records.length,
      },
      'listening',
    );
    return { url, metricsUrl: ports.metrics?.url, httpApp, dataSource, signingKeys, issuedFirstKey, close };
  } catch (e) {
    await ports.close().catch(() => undefined);
    if (dataSource.isInitialized) await dataSource.destroy().catch(() => undefined);
    await keyProvider?.close().catch(() => undefined);
    throw e;
  }
}

/**
 * Measures the running code and signs the runtime manifest, in every profile: the manifest is a
 * leaf of the transparency log and `/runtime/*` are served everywhere. A runtime that cannot be
 * configured does not stop the start: profile-A routes answer 503 with the reason, logged here.
 * `waitedMs` is what the start waited for the measurement that `ets serve` began at its first moment.
 */
async function startRuntime(runtime: AttestationRuntime, buildId: string, logger: Logger): Promise<void> {
  const waitFrom = performance.now();
  const measured = await runningCode(buildId);
  const waitedMs = Math.round(performance.now() - waitFrom);
  const state = await runtime.start(measured);
  if (state.configured) {
    const m = state.manifest;
    // `hashedFiles` above a handful: the digests recorded by the build no longer match (the install
    // was copied, or changed since `npm run build`), and every start pays for hashing them again.
    const stats = 'stats' in measured ? { measured: { ...measured.stats, waitedMs } } : {};
    logger.info({ runtimeHash: m.manifest.runtimeHash, manifestHash: m.manifestHash, evaluatorHash: m.manifest.evaluatorHash, ...stats }, 'runtime manifest signed');
  } else {
    logger.warn({ reason: state.reason }, 'runtime not configured: profile-A routes that sign or verify answer 503');
  }
}

/**
 * Crash recovery: an intent a crash left RELEASED gets its Trust Record from the saved release
 * context; PREPARED and ERRORED intents are reported for reconciliation (GET /execution-intents).
 */
async function reconcileAtStart(container: Container, logger: Logger): Promise<void> {
  const finalized = await container.get<ExecutionService>(TOKENS.ExecutionService).recoverReleased();
  const open = await container.get<ExecutionStore>(TOKENS.ExecutionStore).listIntents(['PREPARED', 'ERRORED'], EVERY_CALLER, 1, 20);
  if (finalized > 0) logger.info({ finalized }, 'finalized intents left RELEASED by an earlier stop');
  if (open.total > 0) {
    logger.warn(
      { count: open.total, ids: open.items.map((i) => i.intent.businessTransactionId) },
      'execution intents need reconciliation at their connector (GET /execution-intents, POST /execution-intents/{id}/resolve)',
    );
  }
}

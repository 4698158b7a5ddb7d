import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Container } from 'inversify';
import type { DataSource } from 'typeorm';
import {
  TypeOrmAttestationStore,
  TypeOrmExecutionStore,
  TypeOrmExternalConnectorStore,
  TypeOrmHandbookLeadStore,
  TypeOrmAuditEventStore,
  TypeOrmPendingChangeStore,
  TypeOrmPolicyStore,
  TypeOrmReceiptStore,
  TypeOrmStorageHealth,
  TypeOrmTransparencyLog,
  TypeOrmVerificationStore,
  TypeOrmSignalSourceStore,
  TypeOrmAuthorityGrantStore,
  TypeOrmSingleUseLedger,
  TypeOrmRecordedDecisions,
  TypeOrmNoticeOutbox,
  TypeOrmConsoleSessionStore,
  TypeOrmMcpServerStore,
} from '@ets/adapters-persistence';
import {
  Ed25519SourceProofs,
  Ed25519StepUpVerifier,
  JwksSignatureVerifier,
  JwsProofSigner,
  KeyRingReleaseSigner,
  KeyRingSigner,
  NoteCheckpointSigner,
  Sha256Hasher,
  StandardWebhookSigner,
  type ServiceSigningKeys,
} from '@ets/adapters-crypto';
import {
  attestationRoutes,
  bearerAuthentication,
  businessValidationRoutes,
  consoleRoutes,
  loadConsoleAssets,
  createHttpApp,
  excluding,
  readsEverything,
  simpleKeyAuthentication,
  executionRoutes,
  overrideRoutes,
  externalConnectorRoutes,
  isAuthDisabled,
  createRateLimiters,
  handbookRoutes,
  mcpRoutes,
  type RateLimiters,
  docsRoutes,
  identityRoutes,
  noAuthentication,
  operationsRoutes,
  policyRoutes,
  signingKeyRoutes,
  transparencyLogRoutes,
  type HttpApp,
  type RouteModule,
  verificationRoutes,
} from '@ets/adapters-http';
import {
  AttestationAudit,
  AttestationRuntime,
  AttestationService,
  AttestationVerifier,
  ExecutionConfirmation,
  OverrideService,
  SecurityEvents,
  type AttestationStore,
  type PolicyCatalog,
  type ProofSigner,
  AuthenticationAudit,
  CheckpointPublisher,
  ConsoleSessions,
  type ConsoleSessionStore,
  type TransactionSearch,
  GovernanceAudit,
  CompilingPolicyCatalog,
  ExecutionService,
  HeldTransactions,
  executionPhases,
  type ExecutionDeps,
  ExternalConnectorGovernance,
  BuiltInConnectors,
  ConnectorChain,
  ExternalConnectors,
  type ExternalConnectorStore,
  type Egress,
  ApprovalChecker,
  AuthorityGrantGovernance,
  SandboxApprovals,
  SignalSourceClient,
  SignalSourceGovernance,
  type AuthorityGrantStore,
  type SignalSourceStore,
  type SingleUseLedger,
  type SourceProofVerifier,
  type ExecutionStore,
  PolicyGovernance,
  PolicyImpactPreview,
  PolicyService,
  NO_NOTICES,
  NoticeDelivery,
  WebhookNotices,
  type PendingItemNotifier,
  type PendingChangeStore,
  type PolicyStore,
  type StepUpSignatureVerifier,
  type ApiKeyRecord,
  type AuditEventStore,
  type CallerDirectory,
  type Clock,
  type Hasher,
  type IdGenerator,
  type Logger,
  type SignatureVerifier,
  type Signer,
  type SigningKeyCustody,
  type StorageHealth,
  VerificationService,
  type ReceiptStore,
  type TransparencyLog,
  type VerificationStore,
  InputSchemas,
  McpConnectorRegistry,
  McpServerGovernance,
  McpToolCalls,
  McpToolCatalog,
  type ConnectorRegistry,
  type McpServerStore,
  type McpUpstreams,
} from '@ets/domain';
import type { Settings } from './config/settings.js';
import { ApiKeyDirectory } from './keys/api-keys.js';
import { HttpsEgress, McpUpstreamPool, SandboxConnector } from '@ets/adapters-connectors';
import { withSandboxStages } from './runtime/sandbox-hooks.js';
import { sandboxJournal } from './runtime/sandbox-journal.js';
import { TOKENS } from './tokens.js';
import { randomIds, randomNonces, systemClock } from './runtime/system.js';
import { DEMO_APPROVER_PUBLIC_KEY_PEM, demoApproverSigner } from './runtime/demo-approver.js';
import type { ServiceMetrics } from './metrics/service-metrics.js';
import { PublishedCheckpointFile } from './runtime/published-checkpoint-file.js';
import { consoleDistDir } from './runtime/console-assets.js';

/** What is opened before the container is built (async resources). */
export interface OpenedResources {
  settings: Settings;
  logger: Logger;
  dataSource: DataSource;
  buildId: string;
  signingKeys: ServiceSigningKeys;
  apiKeys: readonly ApiKeyRecord[];
  clock?: Clock;
  /** Prometheus metrics (SVC_METRICS_PORT): when given, the ports below are wrapped to feed them. */
  metrics?: ServiceMetrics;
}

type Resolver = { get<U>(id: symbol): U };
const get = <T>(ctx: Resolver, id: symbol): T => ctx.get<T>(id);

/**
 * The one composition root. Domain services and adapters are built here with plain constructors
 * (`toDynamicValue`), so neither carries Inversify decorators.
 */
export function buildContainer(res: OpenedResources): Container {
  const c = new Container({ defaultScope: 'Singleton' });
  // Metrics decorate the ports here, never inside them (service-metrics.ts).
  const m = res.metrics;
  const timedStore = <T extends object>(name: string, store: T): T => (m ? m.store(name, store) : store);

  c.bind<Settings>(TOKENS.Settings).toConstantValue(res.settings);
  c.bind<Logger>(TOKENS.Logger).toConstantValue(res.logger);
  c.bind<DataSource>(TOKENS.DataSource).toConstantValue(res.dataSource);
  c.bind<string>(TOKENS.BuildId).toConstantValue(res.buildId);
  c.bind<Clock>(TOKENS.Clock).toConstantValue(res.clock ?? systemClock);
  c.bind<IdGenerator>(TOKENS.IdGenerator).toConstantValue(randomIds);
  c.bind<ServiceSigningKeys>(TOKENS.SigningKeys).toConstantValue(res.signingKeys);
  // Which provider holds the keys (disk | env | pkcs11): profile A's /health reports it as signing_mode.
  c.bind<SigningKeyCustody>(TOKENS.SigningKeyCustody).toConstantValue(res.signingKeys);

  // Adapters
  c.bind<StorageHealth>(TOKENS.StorageHealth).toDynamicValue((ctx) => new TypeOrmStorageHealth(get(ctx, TOKENS.DataSource)));
  c.bind<AuditEventStore>(TOKENS.AuditEventStore).toDynamicValue((ctx) => timedStore('audit-events', new TypeOrmAuditEventStore(get(ctx, TOKENS.DataSource))));
  c.bind<Hasher>(TOKENS.Hasher).toConstantValue(new Sha256Hasher());
  c.bind<Signer>(TOKENS.Signer).toDynamicValue((ctx) => {
    const signer = new KeyRingSigner(get<ServiceSigningKeys>(ctx, TOKENS.SigningKeys));
    return m ? m.signer(signer) : signer;
  });
  c.bind<SignatureVerifier>(TOKENS.SignatureVerifier).toDynamicValue((ctx) => new JwksSignatureVerifier(get<ServiceSigningKeys>(ctx, TOKENS.SigningKeys)));
  c.bind<CallerDirectory>(TOKENS.CallerDirectory).toConstantValue(new ApiKeyDirectory(res.apiKeys));
  c.bind<PolicyStore>(TOKENS.PolicyStore).toDynamicValue((ctx) => timedStore('policies', new TypeOrmPolicyStore(get(ctx, TOKENS.DataSource))));
  c.bind<PendingChangeStore>(TOKENS.PendingChangeStore).toDynamicValue((ctx) => timedStore('pending-changes', new TypeOrmPendingChangeStore(get(ctx, TOKENS.DataSource))));
  c.bind<StepUpSignatureVerifier>(TOKENS.StepUpSignatureVerifier).toConstantValue(new Ed25519StepUpVerifier());
  c.bind<HttpsEgress>(TOKENS.HttpsEgress).toDynamicValue((ctx) => {
    const { egress } = get<Settings>(ctx, TOKENS.Settings);
    return new HttpsEgress({ dnsServers: egress.dnsServers, allowCidrs: egress.allowCidrs, extraCaPem: egress.extraCa?.pem });
  });
  c.bind<Egress>(TOKENS.Egress).toDynamicValue((ctx) => {
    const https = get<HttpsEgress>(ctx, TOKENS.HttpsEgress);
    return m ? m.egress(https) : https;
  });

  // Notifications of new pending items (CONTRACT "Notifications"): the notices go into the outbox
  // in each item's own commit; a background worker (server.ts) delivers them.
  c.bind<PendingItemNotifier>(TOKENS.PendingItemNotifier).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    if (!settings.notifications) return NO_NOTICES;
    return new WebhookNotices({ endpoints: settings.notifications.endpoints, publicBase: settings.publicUrl, ids: get(ctx, TOKENS.IdGenerator) });
  });
  c.bind<NoticeDelivery>(TOKENS.NoticeDelivery).toDynamicValue((ctx) => {
    const notifications = get<Settings>(ctx, TOKENS.Settings).notifications;
    if (!notifications) throw new Error('notifications are not configured (SVC_NOTIFY_WEBHOOK_URLS)');
    return new NoticeDelivery({
      outbox: new TypeOrmNoticeOutbox(get(ctx, TOKENS.DataSource)),
      egress: get(ctx, TOKENS.Egress),
      signer: new StandardWebhookSigner(notifications.secret),
      clock: get(ctx, TOKENS.Clock),
      ids: get(ctx, TOKENS.IdGenerator),
    });
  });

  // Domain services
  c.bind<AuthenticationAudit>(TOKENS.AuthenticationAudit).toDynamicValue(
    (ctx) => new AuthenticationAudit(get(ctx, TOKENS.Signer), get(ctx, TOKENS.AuditEventStore), get(ctx, TOKENS.Clock), get(ctx, TOKENS.IdGenerator)),
  );
  // The approvers' console: sessions in the database, so every instance on it knows them.
  c.bind<ConsoleSessionStore>(TOKENS.ConsoleSessionStore).toDynamicValue((ctx) => new TypeOrmConsoleSessionStore(get(ctx, TOKENS.DataSource)));
  c.bind<ConsoleSessions>(TOKENS.ConsoleSessions).toDynamicValue(
    (ctx) =>
      new ConsoleSessions({
        store: get(ctx, TOKENS.ConsoleSessionStore),
        keys: get<ApiKeyDirectory>(ctx, TOKENS.CallerDirectory),
        hasher: get(ctx, TOKENS.Hasher),
        clock: get(ctx, TOKENS.Clock),
        nonces: randomNonces,
      }),
  );
  c.bind<GovernanceAudit>(TOKENS.GovernanceAudit).toDynamicValue(
    (ctx) => new GovernanceAudit(get(ctx, TOKENS.Signer), get(ctx, TOKENS.Clock), get(ctx, TOKENS.IdGenerator)),
  );
  c.bind<PolicyService>(TOKENS.PolicyService).toDynamicValue((ctx) => new PolicyService(get(ctx, TOKENS.PolicyStore)));
  c.bind<PolicyGovernance>(TOKENS.PolicyGovernance).toDynamicValue(
    (ctx) =>
      new PolicyGovernance({
        ...governedKindDeps(ctx),
        policies: get(ctx, TOKENS.PolicyStore),
        hasher: get(ctx, TOKENS.Hasher),
      }),
  );

  // Published, approved policy versions, compiled once (both profiles decide by them).
  c.bind<PolicyCatalog>(TOKENS.PolicyCatalog).toDynamicValue((ctx) => new CompilingPolicyCatalog(get<PolicyStore>(ctx, TOKENS.PolicyStore)));

  // Execution pipeline (profile T)
  c.bind<ExecutionStore>(TOKENS.ExecutionStore).toDynamicValue((ctx) => timedStore('execution', new TypeOrmExecutionStore(get(ctx, TOKENS.DataSource))));
  c.bind<ExternalConnectorStore>(TOKENS.ExternalConnectorStore).toDynamicValue((ctx) => new TypeOrmExternalConnectorStore(get(ctx, TOKENS.DataSource)));
  c.bind<ExternalConnectors>(TOKENS.ExternalConnectors).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    const registrations = get<ExternalConnectorStore>(ctx, TOKENS.ExternalConnectorStore);
    return new ExternalConnectors(registrations, {
      egress: get(ctx, TOKENS.Egress),
      signer: new KeyRingReleaseSigner(get<ServiceSigningKeys>(ctx, TOKENS.SigningKeys)),
      clock: get(ctx, TOKENS.Clock),
      ids: get(ctx, TOKENS.IdGenerator),
      issuer: settings.issuer,
      registrations,
    });
  });
  // Connector kinds, chained (each owns its namespaces): built in and reserved, the MCP servers' `mcp-*`, then external HTTPS endpoints.
  c.bind<ConnectorChain>(TOKENS.ConnectorRegistry).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    const builtIn = new BuiltInConnectors([
      new SandboxConnector({ failureInjection: settings.sandbox, journal: settings.sandbox ? sandboxJournal(settings.dataDir) : undefined }),
    ]);
    return new ConnectorChain([builtIn, get<McpConnectorRegistry>(ctx, TOKENS.McpConnectorRegistry), get<ExternalConnectors>(ctx, TOKENS.ExternalConnectors)]);
  });
  c.bind<ExternalConnectorGovernance>(TOKENS.ExternalConnectorGovernance).toDynamicValue((ctx) => {
    const chain = get<ConnectorChain>(ctx, TOKENS.ConnectorRegistry);
    const external = get<ExternalConnectors>(ctx, TOKENS.ExternalConnectors);
    return new ExternalConnectorGovernance({
      ...governedKindDeps(ctx),
      registrations: get(ctx, TOKENS.ExternalConnectorStore),
      egress: get(ctx, TOKENS.Egress),
      namespaceOwner: (namespace) => chain.ownedByAnother(namespace, external),
    });
  });
  bindBusinessValidation(c, res);
  bindMcpGateway(c);
  c.bind<ExecutionService>(TOKENS.ExecutionService).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    const deps: ExecutionDeps = {
      store: get(ctx, TOKENS.ExecutionStore),
      signer: get(ctx, TOKENS.Signer),
      hasher: get(ctx, TOKENS.Hasher),
      clock: get(ctx, TOKENS.Clock),
      ids: get(ctx, TOKENS.IdGenerator),
      policies: get(ctx, TOKENS.PolicyCatalog),
      connectors: get(ctx, TOKENS.ConnectorRegistry),
      sources: get(ctx, TOKENS.SignalSourceClient),
      grants: get(ctx, TOKENS.AuthorityGrantStore),
      approvals: get(ctx, TOKENS.ApprovalChecker),
      isAuthDisabled,
      holds: { ttlSeconds: settings.overrideTtlSeconds, notifier: get(ctx, TOKENS.PendingItemNotifier) },
    };
    // The phases in the domain's order; sandbox mode adds its pauses as stages of their own.
    const phases = executionPhases(deps);
    return new ExecutionService(deps, settings.sandbox ? withSandboxStages(deps, phases) : phases);
  });

  // Held transactions: a human approves (released through the pipeline) or rejects them on the server.
  c.bind<HeldTransactions>(TOKENS.HeldTransactions).toDynamicValue(
    (ctx) =>
      new HeldTransactions({
        policies: get(ctx, TOKENS.PolicyCatalog),
        store: get(ctx, TOKENS.ExecutionStore),
        execution: get(ctx, TOKENS.ExecutionService),
        signer: get(ctx, TOKENS.Signer),
        hasher: get(ctx, TOKENS.Hasher),
        clock: get(ctx, TOKENS.Clock),
        stepUpVerifier: get(ctx, TOKENS.StepUpSignatureVerifier),
        sleep: (ms, signal) => sleep(ms, undefined, { signal }).catch(() => undefined),
      }),
  );

  // Transparency log: appended by the stores in their transactions; checkpoints and proofs here.
  c.bind<TransparencyLog>(TOKENS.TransparencyLog).toDynamicValue((ctx) => new TypeOrmTransparencyLog(get(ctx, TOKENS.DataSource)));
  c.bind<CheckpointPublisher>(TOKENS.CheckpointPublisher).toDynamicValue(
    (ctx) =>
      new CheckpointPublisher({
        log: get(ctx, TOKENS.TransparencyLog),
        signer: new NoteCheckpointSigner(get<Settings>(ctx, TOKENS.Settings).logOrigin, get(ctx, TOKENS.Signer), get<ServiceSigningKeys>(ctx, TOKENS.SigningKeys)),
        published: new PublishedCheckpointFile(get<Settings>(ctx, TOKENS.Settings).dataDir),
        clock: get(ctx, TOKENS.Clock),
      }),
  );

  // Verification, receipts, replay
  c.bind<VerificationStore>(TOKENS.VerificationStore).toDynamicValue((ctx) => timedStore('verifications', new TypeOrmVerificationStore(get(ctx, TOKENS.DataSource))));
  c.bind<ReceiptStore>(TOKENS.ReceiptStore).toDynamicValue((ctx) => timedStore('receipts', new TypeOrmReceiptStore(get(ctx, TOKENS.DataSource))));
  c.bind<VerificationService>(TOKENS.VerificationService).toDynamicValue(
    (ctx) =>
      new VerificationService({
        records: get(ctx, TOKENS.ExecutionStore),
        policies: get(ctx, TOKENS.PolicyStore),
        verifications: get(ctx, TOKENS.VerificationStore),
        receipts: get(ctx, TOKENS.ReceiptStore),
        signer: get(ctx, TOKENS.Signer),
        verifier: get(ctx, TOKENS.SignatureVerifier),
        hasher: get(ctx, TOKENS.Hasher),
        clock: get(ctx, TOKENS.Clock),
        ids: get(ctx, TOKENS.IdGenerator),
        transparency: get(ctx, TOKENS.CheckpointPublisher),
      }),
  );

  bindAttestation(c, res);

  // HTTP
  c.bind<RouteModule[]>(TOKENS.RouteModules).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    // CONTRACT "Profiles": profile A mounts its own shapes of these; everything else is in every profile.
    const shaped = settings.profile === 'transaction' ? [] : ['post /execute', 'post /verify', 'get /health'];
    const profileT = (m: RouteModule) => excluding(m, ...shaped);
    return [
      profileT(
        operationsRoutes({
          storageHealth: get(ctx, TOKENS.StorageHealth),
          buildId: get(ctx, TOKENS.BuildId),
          profile: settings.profile,
          redis: settings.redisUrl ? () => get<RateLimiters>(ctx, TOKENS.RateLimiters).sharedStoreState() ?? 'DOWN' : undefined,
        }),
      ),
      docsRoutes({ profile: settings.profile }),
      identityRoutes({ auditEvents: get(ctx, TOKENS.AuditEventStore), verifier: get(ctx, TOKENS.SignatureVerifier) }),
      signingKeyRoutes(get<ServiceSigningKeys>(ctx, TOKENS.SigningKeys)),
      policyRoutes({
        policies: get(ctx, TOKENS.PolicyService),
        governance: get(ctx, TOKENS.PolicyGovernance),
        impact: new PolicyImpactPreview({ changes: get(ctx, TOKENS.PendingChangeStore), decisions: new TypeOrmRecordedDecisions(get(ctx, TOKENS.DataSource)) }),
      }),
      externalConnectorRoutes({ governance: get(ctx, TOKENS.ExternalConnectorGovernance) }),
      mcpRoutes({
        governance: get(ctx, TOKENS.McpServerGovernance),
        gateway: { calls: get(ctx, TOKENS.McpToolCalls), logger: get<Logger>(ctx, TOKENS.Logger).child({ component: 'mcp-gateway' }), serverInfo: { name: 'ets', version: get<string>(ctx, TOKENS.BuildId) } },
        allowedOrigins: settings.mcp.allowedOrigins,
      }),
      businessValidationRoutes({
        sources: get(ctx, TOKENS.SignalSourceGovernance),
        grants: get(ctx, TOKENS.AuthorityGrantGovernance),
        sandboxApprovals: settings.sandbox
          ? new SandboxApprovals({ signer: demoApproverSigner, hasher: get(ctx, TOKENS.Hasher), clock: get(ctx, TOKENS.Clock), ids: get(ctx, TOKENS.IdGenerator), nonces: randomNonces })
          : undefined,
      }),
      profileT(
        executionRoutes({
          service: get(ctx, TOKENS.ExecutionService),
          audit: get(ctx, TOKENS.AuthenticationAudit),
          store: get(ctx, TOKENS.ExecutionStore),
          search: get<ExecutionStore & TransactionSearch>(ctx, TOKENS.ExecutionStore),
          verifier: get(ctx, TOKENS.SignatureVerifier),
          clock: get(ctx, TOKENS.Clock),
        }),
      ),
      overrideRoutes({ held: get(ctx, TOKENS.HeldTransactions) }),
      profileT(verificationRoutes({ service: get(ctx, TOKENS.VerificationService) })),
      transparencyLogRoutes({
        log: get(ctx, TOKENS.TransparencyLog),
        publisher: get(ctx, TOKENS.CheckpointPublisher),
        records: get(ctx, TOKENS.ExecutionStore),
        hasher: get(ctx, TOKENS.Hasher),
      }),
      consoleRoutes({
        sessions: get(ctx, TOKENS.ConsoleSessions),
        directory: get(ctx, TOKENS.CallerDirectory),
        authentication: authenticationOptions(ctx),
        cookieSecure: settings.cookieSecure,
        assets: loadConsoleAssets(consoleDistDir()),
      }),
      handbookRoutes({ leads: new TypeOrmHandbookLeadStore(get(ctx, TOKENS.DataSource)), clock: get(ctx, TOKENS.Clock), downloadUrl: '/documentation' }),
      attestationRoutes({
        profile: settings.profile,
        service: get(ctx, TOKENS.AttestationService),
        verifier: get(ctx, TOKENS.AttestationVerifier),
        overrides: get(ctx, TOKENS.OverrideService),
        confirmation: get(ctx, TOKENS.ExecutionConfirmation),
        audit: get(ctx, TOKENS.AttestationAudit),
        runtime: get(ctx, TOKENS.AttestationRuntime),
        store: get(ctx, TOKENS.AttestationStore),
        clock: get(ctx, TOKENS.Clock),
        signingMode: get<SigningKeyCustody>(ctx, TOKENS.SigningKeyCustody).provider,
      }),
    ];
  });

  c.bind<RateLimiters>(TOKENS.RateLimiters).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    return createRateLimiters({
      ...settings.rateLimits,
      store: settings.redisUrl ? { redisUrl: settings.redisUrl } : 'memory',
      logger: get(ctx, TOKENS.Logger),
      onRefusal: m?.rateLimitRefused,
    });
  });

  c.bind<HttpApp>(TOKENS.HttpApp).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    const rl = get<RateLimiters>(ctx, TOKENS.RateLimiters);
    const { audit, onFailure, failureLimit } = authenticationOptions(ctx);
    const authenticate = settings.authDisabled
      ? noAuthentication()
      : bearerAuthentication({ directory: get(ctx, TOKENS.CallerDirectory), audit, onFailure, failureLimit, sessions: get(ctx, TOKENS.ConsoleSessions) });
    return createHttpApp({
      logger: get(ctx, TOKENS.Logger),
      bodyLimitBytes: settings.bodyLimitBytes,
      modules: get(ctx, TOKENS.RouteModules),
      authenticate,
      simpleKeyAuthentication: settings.profile === 'attestation-simple' ? simpleKeyAuthentication({ key: settings.simpleApiKey, audit, onFailure, failureLimit }) : undefined,
      limiters: rl.limiters,
      // Spec 8: the per-caller execute limit is mounted only when caller authentication is enabled.
      callerLimiters: settings.authDisabled ? {} : rl.callerLimiters,
      trustProxy: settings.trustProxy,
      observer: m?.http,
    });
  });
  return c;
}

/** How a failed authentication is handled: audited, counted against the address's limit, told to profile A's security events. */
function authenticationOptions(ctx: Resolver) {
  const security = ctx.get<SecurityEvents>(TOKENS.SecurityEvents);
  const onFailure = (a: { method: string; route: string }) =>
    security.record('authentication_failed', { callerId: null, operation: `${a.method} ${a.route}`, detail: 'missing, malformed or unknown key' });
  return { audit: ctx.get<AuthenticationAudit>(TOKENS.AuthenticationAudit), onFailure, failureLimit: ctx.get<RateLimiters>(TOKENS.RateLimiters).authFailure };
}

/** What every governed kind of change shares (GovernedKindDeps): the change store, step-up checks, the callers' step-up keys, time, ids, audit, notifications. */
function governedKindDeps(ctx: Resolver) {
  return {
    changes: ctx.get<PendingChangeStore>(TOKENS.PendingChangeStore),
    stepUpVerifier: ctx.get<StepUpSignatureVerifier>(TOKENS.StepUpSignatureVerifier),
    approvers: ctx.get<ApiKeyDirectory>(TOKENS.CallerDirectory),
    clock: ctx.get<Clock>(TOKENS.Clock),
    ids: ctx.get<IdGenerator>(TOKENS.IdGenerator),
    audit: ctx.get<GovernanceAudit>(TOKENS.GovernanceAudit),
    notifier: ctx.get<PendingItemNotifier>(TOKENS.PendingItemNotifier),
  };
}

/** Business validation: signal sources, authority grants, signed approvals (and the single-use ledger they share). */
function bindBusinessValidation(c: Container, res: OpenedResources): void {
  c.bind<SingleUseLedger>(TOKENS.SingleUseLedger).toDynamicValue((ctx) => new TypeOrmSingleUseLedger(get(ctx, TOKENS.DataSource)));
  c.bind<SourceProofVerifier>(TOKENS.SourceProofVerifier).toConstantValue(new Ed25519SourceProofs());
  c.bind<SignalSourceStore>(TOKENS.SignalSourceStore).toDynamicValue((ctx) => new TypeOrmSignalSourceStore(get(ctx, TOKENS.DataSource)));
  c.bind<SignalSourceGovernance>(TOKENS.SignalSourceGovernance).toDynamicValue(
    (ctx) => new SignalSourceGovernance({ ...governedKindDeps(ctx), sources: get(ctx, TOKENS.SignalSourceStore), egress: get(ctx, TOKENS.Egress), keys: get(ctx, TOKENS.SourceProofVerifier) }),
  );
  c.bind<SignalSourceClient>(TOKENS.SignalSourceClient).toDynamicValue(
    (ctx) =>
      new SignalSourceClient({
        egress: get(ctx, TOKENS.Egress),
        sources: get(ctx, TOKENS.SignalSourceStore),
        proofs: get(ctx, TOKENS.SourceProofVerifier),
        clock: get(ctx, TOKENS.Clock),
        nonces: randomNonces,
        used: get(ctx, TOKENS.SingleUseLedger),
        timeoutMs: res.settings.sourceTimeoutMs,
      }),
  );
  c.bind<AuthorityGrantStore>(TOKENS.AuthorityGrantStore).toDynamicValue((ctx) => new TypeOrmAuthorityGrantStore(get(ctx, TOKENS.DataSource)));
  c.bind<AuthorityGrantGovernance>(TOKENS.AuthorityGrantGovernance).toDynamicValue(
    (ctx) => new AuthorityGrantGovernance({ ...governedKindDeps(ctx), grants: get(ctx, TOKENS.AuthorityGrantStore), maxGrantDays: res.settings.grantMaxDays }),
  );
  c.bind<ApprovalChecker>(TOKENS.ApprovalChecker).toDynamicValue(
    (ctx) =>
      new ApprovalChecker({
        approvers: get<ApiKeyDirectory>(ctx, TOKENS.CallerDirectory),
        verifier: get(ctx, TOKENS.StepUpSignatureVerifier),
        used: get(ctx, TOKENS.SingleUseLedger),
        hasher: get(ctx, TOKENS.Hasher),
        clock: get(ctx, TOKENS.Clock),
        // The demo approver exists in sandbox mode only.
        demoApproverPublicKeyPem: res.settings.sandbox ? DEMO_APPROVER_PUBLIC_KEY_PEM : undefined,
      }),
  );
}

/**
 * The MCP gateway (CONTRACT "MCP gateway"): upstream servers by maker-checker, their sessions
 * (the SDK's client over the egress adapter's pinned fetch, or stdio), the tools offered, the
 * connector of `mcp-<server>:…` actions and the `tools/call` use case.
 */
function bindMcpGateway(c: Container): void {
  c.bind<McpServerStore>(TOKENS.McpServerStore).toDynamicValue((ctx) => new TypeOrmMcpServerStore(get(ctx, TOKENS.DataSource)));
  c.bind<McpUpstreamPool>(TOKENS.McpUpstreams).toDynamicValue(
    (ctx) =>
      new McpUpstreamPool({
        fetch: get<HttpsEgress>(ctx, TOKENS.HttpsEgress).fetch,
        stdioServers: get<Settings>(ctx, TOKENS.Settings).mcp.stdioServers,
        logger: get<Logger>(ctx, TOKENS.Logger).child({ component: 'mcp-upstream' }),
      }),
  );
  c.bind<InputSchemas>(TOKENS.McpInputSchemas).toConstantValue(new InputSchemas());
  c.bind<McpToolCatalog>(TOKENS.McpToolCatalog).toDynamicValue(
    (ctx) =>
      new McpToolCatalog({
        servers: get(ctx, TOKENS.McpServerStore),
        upstreams: get<McpUpstreams>(ctx, TOKENS.McpUpstreams),
        schemas: get(ctx, TOKENS.McpInputSchemas),
        logger: get<Logger>(ctx, TOKENS.Logger).child({ component: 'mcp-gateway' }),
      }),
  );
  c.bind<McpConnectorRegistry>(TOKENS.McpConnectorRegistry).toDynamicValue(
    (ctx) =>
      new McpConnectorRegistry({
        servers: get(ctx, TOKENS.McpServerStore),
        catalog: get(ctx, TOKENS.McpToolCatalog),
        upstreams: get<McpUpstreams>(ctx, TOKENS.McpUpstreams),
        schemas: get(ctx, TOKENS.McpInputSchemas),
        clock: get(ctx, TOKENS.Clock),
      }),
  );
  c.bind<McpServerGovernance>(TOKENS.McpServerGovernance).toDynamicValue(
    (ctx) =>
      new McpServerGovernance({
        ...governedKindDeps(ctx),
        servers: get(ctx, TOKENS.McpServerStore),
        egress: get(ctx, TOKENS.Egress),
        stdioServers: [...get<Settings>(ctx, TOKENS.Settings).mcp.stdioServers.keys()],
      }),
  );
  c.bind<McpToolCalls>(TOKENS.McpToolCalls).toDynamicValue((ctx) => {
    const policies = get<PolicyStore>(ctx, TOKENS.PolicyStore);
    return new McpToolCalls({
      catalog: get(ctx, TOKENS.McpToolCatalog),
      schemas: get(ctx, TOKENS.McpInputSchemas),
      execution: get(ctx, TOKENS.ExecutionService),
      held: get(ctx, TOKENS.HeldTransactions),
      holdSeconds: get<Settings>(ctx, TOKENS.Settings).mcp.holdSeconds,
      policyInEffect: (name) => policies.versionInEffect(name),
      ids: get(ctx, TOKENS.IdGenerator),
    });
  });
}

/** Profile A: the attestation store, its runtime, and the services of its routes. */
function bindAttestation(c: Container, res: OpenedResources): void {
  const settings = res.settings;
  const variant = settings.profile === 'attestation-simple' ? 'attestation-simple' : 'attestation';
  const common = (ctx: Resolver) => ({
    store: get<AttestationStore>(ctx, TOKENS.AttestationStore),
    runtime: get<AttestationRuntime>(ctx, TOKENS.AttestationRuntime),
    hasher: get<Hasher>(ctx, TOKENS.Hasher),
    clock: get<Clock>(ctx, TOKENS.Clock),
    security: get<SecurityEvents>(ctx, TOKENS.SecurityEvents),
  });
  c.bind<TypeOrmAttestationStore>(TOKENS.AttestationStore).toDynamicValue((ctx) => new TypeOrmAttestationStore(get(ctx, TOKENS.DataSource)));
  c.bind<ProofSigner>(TOKENS.ProofSigner).toConstantValue(new JwsProofSigner(res.signingKeys));
  c.bind<AttestationRuntime>(TOKENS.AttestationRuntime).toDynamicValue((ctx) => {
    const hasher = get<Hasher>(ctx, TOKENS.Hasher);
    return new AttestationRuntime({
      store: get(ctx, TOKENS.AttestationStore),
      signer: get(ctx, TOKENS.Signer),
      verifier: get(ctx, TOKENS.SignatureVerifier),
      hasher,
      clock: get(ctx, TOKENS.Clock),
      profile: settings.profile,
      trustRootVersion: hasher.contentHash(res.signingKeys.jwks().keys.map((k) => k.kid).sort()),
      signerKeyId: res.signingKeys.activeKeyIds.keyId,
    });
  });
  c.bind<SecurityEvents>(TOKENS.SecurityEvents).toDynamicValue(
    (ctx) => new SecurityEvents({ store: get(ctx, TOKENS.AttestationStore), clock: get(ctx, TOKENS.Clock), ids: get(ctx, TOKENS.IdGenerator) }),
  );
  c.bind<AttestationService>(TOKENS.AttestationService).toDynamicValue(
    (ctx) =>
      new AttestationService(
        { ...common(ctx), policies: get(ctx, TOKENS.PolicyCatalog), signer: get(ctx, TOKENS.Signer), ids: get(ctx, TOKENS.IdGenerator) },
        variant,
      ),
  );
  c.bind<AttestationVerifier>(TOKENS.AttestationVerifier).toDynamicValue(
    (ctx) => new AttestationVerifier({ ...common(ctx), verifier: get(ctx, TOKENS.SignatureVerifier), ids: get(ctx, TOKENS.IdGenerator) }),
  );
  c.bind<OverrideService>(TOKENS.OverrideService).toDynamicValue(
    (ctx) => new OverrideService({ ...common(ctx), signer: get(ctx, TOKENS.Signer), ids: get(ctx, TOKENS.IdGenerator) }),
  );
  c.bind<ExecutionConfirmation>(TOKENS.ExecutionConfirmation).toDynamicValue(
    (ctx) => new ExecutionConfirmation({ ...common(ctx), verifier: get(ctx, TOKENS.SignatureVerifier), proofs: get(ctx, TOKENS.ProofSigner) }),
  );
  c.bind<AttestationAudit>(TOKENS.AttestationAudit).toDynamicValue(
    (ctx) => new AttestationAudit({ store: get(ctx, TOKENS.AttestationStore), clock: get(ctx, TOKENS.Clock), readsAll: readsEverything }),
  );
}

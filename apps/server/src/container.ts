import 'reflect-metadata';
import { Container } from 'inversify';
import type { DataSource } from 'typeorm';
import {
  TypeOrmExecutionStore,
  TypeOrmHandbookLeadStore,
  TypeOrmAuditEventStore,
  TypeOrmPendingChangeStore,
  TypeOrmPolicyStore,
  TypeOrmReceiptStore,
  TypeOrmStorageHealth,
  TypeOrmVerificationStore,
} from '@ets/adapters-persistence';
import { Ed25519StepUpVerifier, JwksSignatureVerifier, KeyRingSigner, Sha256Hasher, type KeyRing } from '@ets/adapters-crypto';
import {
  bearerAuthentication,
  createHttpApp,
  executionRoutes,
  isAuthDisabled,
  createRateLimiters,
  handbookRoutes,
  type RateLimiters,
  docsRoutes,
  identityRoutes,
  noAuthentication,
  operationsRoutes,
  policyRoutes,
  signingKeyRoutes,
  type HttpApp,
  type RouteModule,
  verificationRoutes,
} from '@ets/adapters-http';
import {
  AuthenticationAudit,
  GovernanceAudit,
  CompilingPolicyCatalog,
  ExecutionService,
  type ConnectorRegistry,
  type ExecutionStore,
  PolicyGovernance,
  PolicyService,
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
  type StorageHealth,
  VerificationService,
  type ReceiptStore,
  type VerificationStore,
} from '@ets/domain';
import type { Settings } from './config/settings.js';
import { ApiKeyDirectory } from './keys/api-keys.js';
import { SandboxConnector, StaticConnectorRegistry } from '@ets/adapters-connectors';
import { sandboxPipelineHooks } from './runtime/sandbox-hooks.js';
import { sandboxJournal } from './runtime/sandbox-journal.js';
import { TOKENS } from './tokens.js';
import { randomIds, systemClock } from './runtime/system.js';

/** What is opened before the container is built (async resources). */
export interface OpenedResources {
  settings: Settings;
  logger: Logger;
  dataSource: DataSource;
  buildId: string;
  keyRing: KeyRing;
  apiKeys: readonly ApiKeyRecord[];
  clock?: Clock;
}

/**
 * The one composition root. Domain services and adapters are built here with plain constructors
 * (`toDynamicValue`), so neither carries Inversify decorators.
 */
export function buildContainer(res: OpenedResources): Container {
  const c = new Container({ defaultScope: 'Singleton' });
  const get = <T>(ctx: { get<U>(id: symbol): U }, id: symbol): T => ctx.get<T>(id);

  c.bind<Settings>(TOKENS.Settings).toConstantValue(res.settings);
  c.bind<Logger>(TOKENS.Logger).toConstantValue(res.logger);
  c.bind<DataSource>(TOKENS.DataSource).toConstantValue(res.dataSource);
  c.bind<string>(TOKENS.BuildId).toConstantValue(res.buildId);
  c.bind<Clock>(TOKENS.Clock).toConstantValue(res.clock ?? systemClock);
  c.bind<IdGenerator>(TOKENS.IdGenerator).toConstantValue(randomIds);
  c.bind<KeyRing>(TOKENS.KeyRing).toConstantValue(res.keyRing);

  // Adapters
  c.bind<StorageHealth>(TOKENS.StorageHealth).toDynamicValue((ctx) => new TypeOrmStorageHealth(get(ctx, TOKENS.DataSource)));
  c.bind<AuditEventStore>(TOKENS.AuditEventStore).toDynamicValue((ctx) => new TypeOrmAuditEventStore(get(ctx, TOKENS.DataSource)));
  c.bind<Hasher>(TOKENS.Hasher).toConstantValue(new Sha256Hasher());
  c.bind<Signer>(TOKENS.Signer).toDynamicValue((ctx) => new KeyRingSigner(get<KeyRing>(ctx, TOKENS.KeyRing)));
  c.bind<SignatureVerifier>(TOKENS.SignatureVerifier).toDynamicValue((ctx) => new JwksSignatureVerifier(get<KeyRing>(ctx, TOKENS.KeyRing)));
  c.bind<CallerDirectory>(TOKENS.CallerDirectory).toConstantValue(new ApiKeyDirectory(res.apiKeys));
  c.bind<PolicyStore>(TOKENS.PolicyStore).toDynamicValue((ctx) => new TypeOrmPolicyStore(get(ctx, TOKENS.DataSource)));
  c.bind<PendingChangeStore>(TOKENS.PendingChangeStore).toDynamicValue((ctx) => new TypeOrmPendingChangeStore(get(ctx, TOKENS.DataSource)));
  c.bind<StepUpSignatureVerifier>(TOKENS.StepUpSignatureVerifier).toConstantValue(new Ed25519StepUpVerifier());

  // Domain services
  c.bind<AuthenticationAudit>(TOKENS.AuthenticationAudit).toDynamicValue(
    (ctx) => new AuthenticationAudit(get(ctx, TOKENS.Signer), get(ctx, TOKENS.AuditEventStore), get(ctx, TOKENS.Clock), get(ctx, TOKENS.IdGenerator)),
  );
  c.bind<GovernanceAudit>(TOKENS.GovernanceAudit).toDynamicValue(
    (ctx) => new GovernanceAudit(get(ctx, TOKENS.Signer), get(ctx, TOKENS.AuditEventStore), get(ctx, TOKENS.Clock), get(ctx, TOKENS.IdGenerator)),
  );
  c.bind<PolicyService>(TOKENS.PolicyService).toDynamicValue((ctx) => new PolicyService(get(ctx, TOKENS.PolicyStore)));
  c.bind<PolicyGovernance>(TOKENS.PolicyGovernance).toDynamicValue(
    (ctx) =>
      new PolicyGovernance({
        policies: get(ctx, TOKENS.PolicyStore),
        changes: get(ctx, TOKENS.PendingChangeStore),
        hasher: get(ctx, TOKENS.Hasher),
        stepUpVerifier: get(ctx, TOKENS.StepUpSignatureVerifier),
        clock: get(ctx, TOKENS.Clock),
        ids: get(ctx, TOKENS.IdGenerator),
        audit: get(ctx, TOKENS.GovernanceAudit),
      }),
  );

  // Execution pipeline (profile T)
  c.bind<ExecutionStore>(TOKENS.ExecutionStore).toDynamicValue((ctx) => new TypeOrmExecutionStore(get(ctx, TOKENS.DataSource)));
  c.bind<ConnectorRegistry>(TOKENS.ConnectorRegistry).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    return new StaticConnectorRegistry([
      new SandboxConnector({ failureInjection: settings.sandbox, journal: settings.sandbox ? sandboxJournal(settings.dataDir) : undefined }),
    ]);
  });
  c.bind<ExecutionService>(TOKENS.ExecutionService).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    return new ExecutionService({
      store: get(ctx, TOKENS.ExecutionStore),
      signer: get(ctx, TOKENS.Signer),
      hasher: get(ctx, TOKENS.Hasher),
      clock: get(ctx, TOKENS.Clock),
      ids: get(ctx, TOKENS.IdGenerator),
      policies: new CompilingPolicyCatalog(get<PolicyStore>(ctx, TOKENS.PolicyStore)),
      connectors: get(ctx, TOKENS.ConnectorRegistry),
      hooks: settings.sandbox ? sandboxPipelineHooks() : undefined,
      isAuthDisabled,
    });
  });

  // Verification, receipts, replay
  c.bind<VerificationStore>(TOKENS.VerificationStore).toDynamicValue((ctx) => new TypeOrmVerificationStore(get(ctx, TOKENS.DataSource)));
  c.bind<ReceiptStore>(TOKENS.ReceiptStore).toDynamicValue((ctx) => new TypeOrmReceiptStore(get(ctx, TOKENS.DataSource)));
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
      }),
  );

  // HTTP
  c.bind<RouteModule[]>(TOKENS.RouteModules).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    return [
      operationsRoutes({ storageHealth: get(ctx, TOKENS.StorageHealth), buildId: get(ctx, TOKENS.BuildId), profile: settings.profile }),
      docsRoutes({ profile: settings.profile }),
      identityRoutes({ auditEvents: get(ctx, TOKENS.AuditEventStore), verifier: get(ctx, TOKENS.SignatureVerifier) }),
      signingKeyRoutes(get<KeyRing>(ctx, TOKENS.KeyRing)),
      policyRoutes({ policies: get(ctx, TOKENS.PolicyService), governance: get(ctx, TOKENS.PolicyGovernance) }),
      executionRoutes({
        service: get(ctx, TOKENS.ExecutionService),
        store: get(ctx, TOKENS.ExecutionStore),
        verifier: get(ctx, TOKENS.SignatureVerifier),
        clock: get(ctx, TOKENS.Clock),
      }),
      verificationRoutes({ service: get(ctx, TOKENS.VerificationService) }),
      handbookRoutes({ leads: new TypeOrmHandbookLeadStore(get(ctx, TOKENS.DataSource)), clock: get(ctx, TOKENS.Clock), downloadUrl: '/documentation' }),
    ];
  });

  c.bind<RateLimiters>(TOKENS.RateLimiters).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    return createRateLimiters({
      ...settings.rateLimits,
      store: settings.redisUrl ? { redisUrl: settings.redisUrl } : 'memory',
      logger: get(ctx, TOKENS.Logger),
    });
  });

  c.bind<HttpApp>(TOKENS.HttpApp).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    const rl = get<RateLimiters>(ctx, TOKENS.RateLimiters);
    const authenticate = settings.authDisabled
      ? noAuthentication()
      : bearerAuthentication({ directory: get(ctx, TOKENS.CallerDirectory), audit: get(ctx, TOKENS.AuthenticationAudit) });
    return createHttpApp({
      logger: get(ctx, TOKENS.Logger),
      bodyLimitBytes: settings.bodyLimitBytes,
      modules: get(ctx, TOKENS.RouteModules),
      authenticate,
      limiters: rl.limiters,
      // Spec 8: the per-caller execute limit is mounted only when caller authentication is enabled.
      callerLimiters: settings.authDisabled ? {} : rl.callerLimiters,
      authFailure: rl.authFailure,
      trustProxy: settings.trustProxy,
    });
  });
  return c;
}

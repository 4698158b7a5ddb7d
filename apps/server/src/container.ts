import 'reflect-metadata';
import { Container } from 'inversify';
import type { DataSource } from 'typeorm';
import type { RequestHandler } from 'express';
import { TypeOrmAuditEventStore, TypeOrmStorageHealth } from '@ets/adapters-persistence';
import { JwksSignatureVerifier, KeyRingSigner, Sha256Hasher, type KeyRing } from '@ets/adapters-crypto';
import {
  bearerAuthentication,
  createHttpApp,
  docsRoutes,
  identityRoutes,
  noAuthentication,
  operationsRoutes,
  signingKeyRoutes,
  type HttpApp,
  type RouteModule,
} from '@ets/adapters-http';
import {
  AuthenticationAudit,
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
} from '@ets/domain';
import type { Settings } from './config/settings.js';
import { ApiKeyDirectory } from './keys/api-keys.js';
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

  // Domain services
  c.bind<AuthenticationAudit>(TOKENS.AuthenticationAudit).toDynamicValue(
    (ctx) => new AuthenticationAudit(get(ctx, TOKENS.Signer), get(ctx, TOKENS.AuditEventStore), get(ctx, TOKENS.Clock), get(ctx, TOKENS.IdGenerator)),
  );

  // HTTP
  c.bind<RouteModule[]>(TOKENS.RouteModules).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    return [
      operationsRoutes({ storageHealth: get(ctx, TOKENS.StorageHealth), buildId: get(ctx, TOKENS.BuildId), profile: settings.profile }),
      docsRoutes(),
      identityRoutes({ auditEvents: get(ctx, TOKENS.AuditEventStore), verifier: get(ctx, TOKENS.SignatureVerifier) }),
      signingKeyRoutes(get<KeyRing>(ctx, TOKENS.KeyRing)),
    ];
  });

  c.bind<HttpApp>(TOKENS.HttpApp).toDynamicValue((ctx) => {
    const settings = get<Settings>(ctx, TOKENS.Settings);
    const authenticate: RequestHandler = settings.authDisabled
      ? noAuthentication()
      : bearerAuthentication({ directory: get(ctx, TOKENS.CallerDirectory), audit: get(ctx, TOKENS.AuthenticationAudit) });
    return createHttpApp({
      logger: get(ctx, TOKENS.Logger),
      bodyLimitBytes: settings.bodyLimitBytes,
      modules: get(ctx, TOKENS.RouteModules),
      authenticate,
      limiters: {},
    });
  });
  return c;
}

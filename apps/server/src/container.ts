import 'reflect-metadata';
import { Container } from 'inversify';
import type { DataSource } from 'typeorm';
import type { RequestHandler } from 'express';
import { TypeOrmStorageHealth } from '@ets/adapters-persistence';
import { createHttpApp, docsRoutes, operationsRoutes, type HttpApp, type RouteModule } from '@ets/adapters-http';
import { DomainError, type Clock, type IdGenerator, type Logger, type StorageHealth } from '@ets/domain';
import type { Settings } from './config/settings.js';
import { TOKENS } from './tokens.js';
import { randomIds, systemClock } from './runtime/system.js';

/** What is opened before the container is built (async resources). */
export interface OpenedResources {
  settings: Settings;
  logger: Logger;
  dataSource: DataSource;
  buildId: string;
}

/**
 * The one composition root. Domain services and adapters are built here with plain constructors
 * (`toDynamicValue`), so neither carries Inversify decorators.
 */
export function buildContainer(res: OpenedResources): Container {
  const c = new Container();
  c.bind<Settings>(TOKENS.Settings).toConstantValue(res.settings);
  c.bind<Logger>(TOKENS.Logger).toConstantValue(res.logger);
  c.bind<DataSource>(TOKENS.DataSource).toConstantValue(res.dataSource);
  c.bind<string>(TOKENS.BuildId).toConstantValue(res.buildId);
  c.bind<Clock>(TOKENS.Clock).toConstantValue(systemClock);
  c.bind<IdGenerator>(TOKENS.IdGenerator).toConstantValue(randomIds);
  c.bind<StorageHealth>(TOKENS.StorageHealth)
    .toDynamicValue((ctx) => new TypeOrmStorageHealth(ctx.get<DataSource>(TOKENS.DataSource)))
    .inSingletonScope();

  c.bind<RouteModule[]>(TOKENS.RouteModules)
    .toDynamicValue((ctx) => [
      operationsRoutes({
        storageHealth: ctx.get<StorageHealth>(TOKENS.StorageHealth),
        buildId: ctx.get<string>(TOKENS.BuildId),
        profile: ctx.get<Settings>(TOKENS.Settings).profile,
      }),
      docsRoutes(),
    ])
    .inSingletonScope();

  c.bind<HttpApp>(TOKENS.HttpApp)
    .toDynamicValue((ctx) => {
      const settings = ctx.get<Settings>(TOKENS.Settings);
      const denyAll: RequestHandler = (_req, _res, next) => next(new DomainError('unauthenticated', 'authentication required'));
      return createHttpApp({
        logger: ctx.get<Logger>(TOKENS.Logger),
        bodyLimitBytes: settings.bodyLimitBytes,
        modules: ctx.get<RouteModule[]>(TOKENS.RouteModules),
        authenticate: denyAll,
        limiters: {},
      });
    })
    .inSingletonScope();
  return c;
}

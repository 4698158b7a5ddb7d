/** Every injection token of the composition root, in one place. */
export const TOKENS = {
  Settings: Symbol.for('ets.Settings'),
  Logger: Symbol.for('ets.Logger'),
  Clock: Symbol.for('ets.Clock'),
  IdGenerator: Symbol.for('ets.IdGenerator'),
  DataSource: Symbol.for('ets.DataSource'),
  StorageHealth: Symbol.for('ets.StorageHealth'),
  BuildId: Symbol.for('ets.BuildId'),
  RouteModules: Symbol.for('ets.RouteModules'),
  HttpApp: Symbol.for('ets.HttpApp'),
} as const;

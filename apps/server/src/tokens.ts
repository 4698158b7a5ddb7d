/** Every injection token of the composition root, in one place. */
export const TOKENS = {
  Settings: Symbol.for('ets.Settings'),
  Logger: Symbol.for('ets.Logger'),
  Clock: Symbol.for('ets.Clock'),
  IdGenerator: Symbol.for('ets.IdGenerator'),
  DataSource: Symbol.for('ets.DataSource'),
  BuildId: Symbol.for('ets.BuildId'),
  KeyRing: Symbol.for('ets.KeyRing'),
  StorageHealth: Symbol.for('ets.StorageHealth'),
  AuditEventStore: Symbol.for('ets.AuditEventStore'),
  Hasher: Symbol.for('ets.Hasher'),
  Signer: Symbol.for('ets.Signer'),
  SignatureVerifier: Symbol.for('ets.SignatureVerifier'),
  CallerDirectory: Symbol.for('ets.CallerDirectory'),
  AuthenticationAudit: Symbol.for('ets.AuthenticationAudit'),
  RouteModules: Symbol.for('ets.RouteModules'),
  HttpApp: Symbol.for('ets.HttpApp'),
} as const;

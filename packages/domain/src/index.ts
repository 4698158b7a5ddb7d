export * from './shared/errors.js';
export * from './ports/clock.js';
export * from './ports/crypto.js';
export * from './ports/health.js';
export * from './ports/audit.js';
export * from './ports/logger.js';
export * from './identity/caller.js';

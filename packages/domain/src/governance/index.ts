/** Maker-checker governance, generic over the kind of change (spec 1.6, 2.5, 2.6, 3, 5.9). */
export * from './change.js';
export * from './ports.js';
export * from './step-up.js';
export * from './governance-audit.js';
export * from './maker-checker.js';
export * from './governed-registry.js';
export * from './registrations.js';
export { InMemoryPendingChangeStore } from './in-memory.js';

export * from './data-source.js';
export * from './storage-health.js';
export { MIGRATIONS } from './migrations/index.js';
export * from './stores/audit-event-store.js';
export * from './stores/handbook-lead-store.js';
export * from './stores/execution-store.js';
export * from './stores/pending-change-store.js';
export * from './stores/policy-store.js';
export * from './stores/verification-store.js';

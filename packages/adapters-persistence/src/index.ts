export * from './data-source.js';
export * from './storage-health.js';
export { MIGRATIONS } from './migrations/index.js';

export * from './pending-items.js';
export * from './delivery.js';

export * from './records.js';
export * from './ports.js';
export * from './connectors.js';
export * from './chain.js';
export * from './transaction-request.js';
export * from './execution-service.js';
export * from './policy-catalog.js';

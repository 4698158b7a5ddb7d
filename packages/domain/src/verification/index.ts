export * from './records.js';
export * from './ports.js';
export * from './execution-chain.js';
export * from './verification-service.js';

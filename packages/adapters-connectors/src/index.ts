export * from './sandbox-connector.js';
export * from './egress/index.js';

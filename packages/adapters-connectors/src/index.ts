export * from './sandbox-connector.js';
export * from './connector-registry.js';

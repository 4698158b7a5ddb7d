export * from './sandbox-connector.js';
export * from './egress/index.js';
export * from './mcp/index.js';

/** The MCP gateway: upstream servers by maker-checker, the tools offered, and what a tool call becomes (CONTRACT "MCP gateway"). */
export * from './names.js';
export * from './registration.js';
export * from './ports.js';
export * from './input-schema.js';
export * from './tool-catalog.js';
export * from './connector.js';
export * from './governance.js';
export * from './tool-call.js';
export { InMemoryMcpServerStore } from './in-memory.js';

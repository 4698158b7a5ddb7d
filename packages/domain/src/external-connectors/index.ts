/** External connectors: governed registration (maker-checker) and the signed release (spec 2.5, 4.3.7-8). */
export * from './registration.js';
export * from './ports.js';
export * from './release.js';
export * from './registry.js';
export * from './governance.js';
export { InMemoryExternalConnectorStore } from './in-memory.js';

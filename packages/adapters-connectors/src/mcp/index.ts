export * from './stdio-servers.js';
export * from './upstream-pool.js';

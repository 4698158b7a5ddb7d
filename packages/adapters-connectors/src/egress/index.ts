export * from './https-egress.js';
export * from './address-policy.js';
export * from './resolver.js';
export * from './pinned-fetch.js';
export * from './connection-pool.js';

export * from './databases.js';
export * from './process.js';
export * from './server.js';
export * from './keys.js';
export * from './policies.js';
export * from './transactions.js';

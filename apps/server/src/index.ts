export * from './config/settings.js';
export * from './server.js';
export * from './container.js';
export * from './logger.js';
export { TOKENS } from './tokens.js';

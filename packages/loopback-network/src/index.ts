export * from './dns-server.js';
export * from './certificate-authority.js';

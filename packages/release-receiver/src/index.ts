/**
 * For endpoint owners: verify a release sent by the execution trust service and answer in its
 * protocol (CONTRACT "Egress"). Depends on jose only.
 */
export * from './verify-release.js';
export * from './jti-store.js';
export * from './protocol.js';
export * from './example-receiver.js';

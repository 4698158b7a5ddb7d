/**
 * The part of this package that runs anywhere jose runs, a browser included
 * (`@ets/release-receiver/verify`): verify a release and answer in the protocol, without the
 * example receiver's HTTPS server.
 */
export * from './verify-release.js';
export * from './jti-store.js';
export * from './protocol.js';

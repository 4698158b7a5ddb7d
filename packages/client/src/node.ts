/**
 * @ets/client, Node build: the API of the browser build (index.ts), verifying with Node's crypto,
 * exactly as `ets verify` does.
 */
import { nodeVerifyCrypto } from '@ets/adapters-crypto/node-verify-crypto';
import { offlineVerifier } from './verification.js';

export * from './shared.js';

const offline = offlineVerifier(nodeVerifyCrypto);

/** As in the browser build (`verifyRecord` of index.ts), on Node's crypto. */
export const verifyRecord = offline.verifyRecord;
export const logLeafOf = offline.logLeafOf;
export const verifyLogInclusion = offline.verifyLogInclusion;
export const verifyLogCheckpoint = offline.verifyLogCheckpoint;
export const verifyLogConsistency = offline.verifyLogConsistency;

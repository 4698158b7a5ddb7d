/**
 * @ets/client, browser build (and any runtime without Node's crypto): verification runs on @noble's
 * pure-JS primitives. The Node build (node.ts) is the same API on Node's crypto.
 */
import { portableVerifyCrypto } from '@ets/adapters-crypto/portable';
import { offlineVerifier } from './verification.js';

export * from './shared.js';

const offline = offlineVerifier(portableVerifyCrypto);

/**
 * Verifies any signed record of the service offline, with only its JWKS: the checks of
 * `ets verify` (signatures, fields, hashes, execution chain, transparency proofs). A served
 * response that wraps a record (`POST /execute`, `GET /execution-intents/{id}`, …) is unwrapped.
 */
export const verifyRecord = offline.verifyRecord;
/** The transparency log's leaf input of a signed record, lower-case hex: SHA-256 of its RFC 8785 canonical JSON. */
export const logLeafOf = offline.logLeafOf;
/** A leaf (hex leaf input) is in the tree of a checkpoint signed by a JWKS key (RFC 9162 inclusion proof). */
export const verifyLogInclusion = offline.verifyLogInclusion;
/** A C2SP signed checkpoint (`GET /log/checkpoint`) is signed by a JWKS key; its origin, size and root. */
export const verifyLogCheckpoint = offline.verifyLogCheckpoint;
/** A newer signed checkpoint extends an older one (RFC 9162 consistency proof, `GET /log/proof/consistency`). */
export const verifyLogConsistency = offline.verifyLogConsistency;

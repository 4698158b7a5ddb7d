import type { JwksLike } from '../jwk.js';
import { nodeVerifyCrypto } from '../node-verify-crypto.js';
import { verifyOfflineWith, type OfflineOptions, type OfflineReport } from './verify-offline.js';

/** `verifyOfflineWith` on Node's crypto: what `ets verify` and the demo run. */
export function verifyOffline(record: unknown, jwks: JwksLike, options: OfflineOptions = {}): OfflineReport {
  return verifyOfflineWith(nodeVerifyCrypto, record, jwks, options);
}

import type { Hasher } from '@ets/domain';
import { canonicalize } from './canonical-json.js';
import { toHex, utf8 } from './transparency/bytes.js';

/**
 * The domain's Hasher over a SHA-256 brought by the caller: lower-case hex of SHA-256 over the
 * UTF-8 of RFC 8785 canonical JSON, exactly as Sha256Hasher, for code that runs outside Node too.
 */
export function canonicalHasher(sha256: (data: Uint8Array) => Uint8Array): Hasher {
  const sha256Hex = (text: string): string => toHex(sha256(utf8(text)));
  return { contentHash: (value) => sha256Hex(canonicalize(value)), sha256Hex, canonicalize };
}

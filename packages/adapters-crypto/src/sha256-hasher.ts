import { createHash } from 'node:crypto';
import type { Hasher } from '@ets/domain';
import { canonicalize } from './canonical-json.js';

/** SHA-256 over RFC 8785 canonical JSON, the content hash used for policies and records. */
export class Sha256Hasher implements Hasher {
  contentHash(value: unknown): string {
    return sha256Hex(canonicalize(value));
  }

  sha256Hex(text: string): string {
    return sha256Hex(text);
  }

  canonicalize(value: unknown): string {
    return canonicalize(value);
  }
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

import type { Hasher } from '../ports/crypto.js';

/** Two JSON values are the same value (RFC 8785: 100 and 100.0 are one number). */
export const sameValue = (hasher: Pick<Hasher, 'canonicalize'>, a: unknown, b: unknown): boolean => hasher.canonicalize(a) === hasher.canonicalize(b);

/** Random values from the Web Crypto API, which Node 20+ and every browser have. */

function randomBytes(length: number): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(length));
}

/** 32 random bytes, base64url without padding: a nonce of a step-up envelope or an approval. */
export function randomNonce(): string {
  let binary = '';
  for (const b of randomBytes(32)) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** A version 4 UUID; built from random bytes because `crypto.randomUUID` is missing on pages that are not a secure context. */
export function randomUuid(): string {
  const b = randomBytes(16);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

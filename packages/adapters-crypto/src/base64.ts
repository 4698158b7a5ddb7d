/**
 * Strict base64 decoding. Buffer.from(text, 'base64') silently skips characters it does not
 * know, so several different strings would decode to the same signature; signatures and keys
 * from untrusted records are checked against their canonical encoding instead.
 */

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Bytes of standard, padded base64 text, or undefined when the text is not exactly that. */
export function decodeBase64Strict(text: unknown): Buffer | undefined {
  if (typeof text !== 'string' || text.length % 4 !== 0 || !BASE64.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : undefined;
}

export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}

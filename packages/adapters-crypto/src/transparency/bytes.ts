/**
 * Byte helpers for the transparency log without Node's Buffer, so that the Merkle and checkpoint
 * verification run unchanged in a browser (atob, btoa, TextEncoder exist in both).
 */

const HEX = /^(?:[0-9a-f]{2})*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b.toString(16).padStart(2, '0');
  return out;
}

/** Bytes of lower-case hex text, or undefined when the text is not exactly that. */
export function fromHex(text: unknown): Uint8Array | undefined {
  if (typeof text !== 'string' || !HEX.test(text)) return undefined;
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/**
 * Bytes of standard, padded base64 (RFC 4648 §4), or undefined when the text is not exactly its
 * canonical form: a lenient decoder would let several texts stand for one signature or root.
 */
export function fromBase64(text: unknown): Uint8Array | undefined {
  if (typeof text !== 'string' || text.length % 4 !== 0 || !BASE64.test(text)) return undefined;
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    return undefined;
  }
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return toBase64(out) === text ? out : undefined;
}

/** Base64url without padding (JWK members) to bytes, or undefined. */
export function fromBase64Url(text: unknown): Uint8Array | undefined {
  if (typeof text !== 'string' || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined;
  const padded = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4);
  return fromBase64(padded);
}

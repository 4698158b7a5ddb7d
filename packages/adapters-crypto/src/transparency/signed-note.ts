/**
 * C2SP signed-note (https://c2sp.org/signed-note): a UTF-8 text ending in a newline, a blank
 * line, then one line per signature, `— <key name> <base64(4-byte key ID ‖ signature)>`. Only
 * Ed25519 (signature type 0x01) is implemented, the algorithm of this service's keys. The
 * signature itself comes from outside (the service's Signer, or a verify function for Ed25519), so
 * this module stays pure and runs in a browser.
 */
import { concatBytes, fromBase64, toBase64, utf8 } from './bytes.js';
import { rfc9162, type Sha256 } from './merkle-hasher.js';

export class NoteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NoteError';
  }
}

export interface NoteSignature {
  keyName: string;
  /** The 32-bit key ID (big-endian first 4 bytes of the base64 blob). */
  keyId: number;
  /** The signature bytes after the key ID. */
  signature: Uint8Array;
}

export interface ParsedNote {
  /** The signed text, with its final newline. */
  text: string;
  signatures: NoteSignature[];
}

/** A key that can check note signatures: known by name AND key ID (C2SP: unknown keys are ignored). */
export interface NoteVerifier {
  keyName: string;
  keyId: number;
  verify(message: Uint8Array, signature: Uint8Array): boolean;
}

/** Raw Ed25519 verification (RFC 8032), brought by the caller: node:crypto, WebCrypto or a library. */
export type Ed25519Verify = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => boolean;

const EM_DASH = '\u2014';
const ED25519_TYPE = 0x01;
const ED25519_SIGNATURE_BYTES = 64;
const ED25519_PUBLIC_KEY_BYTES = 32;
/** Bounds on untrusted input; the spec asks for at least 16 signatures (post-quantum ones near 5 kB). */
export const MAX_NOTE_CHARS = 1_000_000;
export const MAX_NOTE_SIGNATURES = 100;

// Any ASCII control character other than newline, and lone surrogates (no UTF-8 form).
const FORBIDDEN_CHARS = /[\u0000-\u0009\u000b-\u001f]|[\ud800-\udfff]/u;
// "Key names MUST be non-empty and MUST NOT contain any Unicode spaces or plus (U+002B)."
const KEY_NAME = /^[^\s+]+$/u;

export function isValidKeyName(name: unknown): name is string {
  return typeof name === 'string' && KEY_NAME.test(name) && !FORBIDDEN_CHARS.test(name);
}

/** C2SP signed-note: key ID = SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ 32-byte Ed25519 public key)[:4], big-endian. */
export function ed25519NoteKeyId(keyName: string, publicKey: Uint8Array, sha256: Sha256 = rfc9162.sha256): number {
  const digest = sha256(concatBytes(utf8(keyName), Uint8Array.of(0x0a, ED25519_TYPE), publicKey));
  return ((digest[0]! << 24) | (digest[1]! << 16) | (digest[2]! << 8) | digest[3]!) >>> 0;
}

export function formatKeyId(keyId: number): string {
  return keyId.toString(16).padStart(8, '0');
}

/** A verifier for an Ed25519 public key (32 raw bytes) published under `keyName`. */
export function ed25519NoteVerifier(keyName: string, publicKey: Uint8Array, verify: Ed25519Verify, sha256?: Sha256): NoteVerifier {
  if (!isValidKeyName(keyName)) throw new NoteError('a key name must be non-empty, without spaces or "+"');
  if (publicKey.length !== ED25519_PUBLIC_KEY_BYTES) throw new NoteError('an Ed25519 public key is 32 bytes');
  const key = Uint8Array.from(publicKey);
  return {
    keyName,
    keyId: ed25519NoteKeyId(keyName, key, sha256),
    verify: (message, signature) => {
      if (signature.length !== ED25519_SIGNATURE_BYTES) return false;
      try {
        return verify(key, message, signature);
      } catch {
        return false;
      }
    },
  };
}

/**
 * A verifier from a C2SP verifier key (`<name>+<hex key ID>+<base64(0x01 ‖ public key)>`, as the
 * Go ecosystem prints them). The key ID must match the one computed from name and key.
 */
export function parseVerifierKey(vkey: string, verify: Ed25519Verify, sha256?: Sha256): NoteVerifier {
  // The name holds no '+'; the base64 key may.
  const m = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/su.exec(vkey);
  const parts = m ? [m[1]!, m[2]!, m[3]!] : [];
  const material = m ? fromBase64(m[3]) : undefined;
  if (!m || !material) throw new NoteError('not a verifier key <name>+<hex id>+<base64 key>');
  if (material[0] !== ED25519_TYPE || material.length !== 1 + ED25519_PUBLIC_KEY_BYTES) throw new NoteError('only Ed25519 (type 0x01) verifier keys are supported');
  const verifier = ed25519NoteVerifier(parts[0]!, material.subarray(1), verify, sha256);
  if (formatKeyId(verifier.keyId) !== parts[1]) throw new NoteError('the verifier key ID does not match its name and key');
  return verifier;
}

/** Splits a signed note into its text and signature lines; checks the format, not the signatures. */
export function parseSignedNote(note: string): ParsedNote {
  if (typeof note !== 'string') throw new NoteError('a note is text');
  if (note.length > MAX_NOTE_CHARS) throw new NoteError('the note is too large');
  if (FORBIDDEN_CHARS.test(note)) throw new NoteError('the note holds control characters (other than newline) or is not valid UTF-8');
  // The text ends at the last blank line: signature lines are never empty.
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new NoteError('the note has no blank line before its signatures');
  const text = note.slice(0, split + 1);
  const block = note.slice(split + 2);
  if (!block.endsWith('\n')) throw new NoteError('the note does not end with a newline');
  const lines = block.slice(0, -1).split('\n');
  if (lines.length > MAX_NOTE_SIGNATURES) throw new NoteError('the note has too many signatures');
  const signatures = lines.map((line): NoteSignature => {
    const m = /^\u2014 (\S+) (\S+)$/u.exec(line);
    const blob = m ? fromBase64(m[2]) : undefined;
    if (!m || !isValidKeyName(m[1]) || !blob || blob.length < 5) throw new NoteError('a signature line is not "— <key name> <base64 signature>"');
    return {
      keyName: m[1]!,
      keyId: ((blob[0]! << 24) | (blob[1]! << 16) | (blob[2]! << 8) | blob[3]!) >>> 0,
      signature: blob.slice(4),
    };
  });
  return { text, signatures };
}

/**
 * Opens a signed note with the keys the caller trusts (C2SP signed-note "Signatures"): a signature
 * by a known key (same name and key ID) must verify; unknown ones are ignored; at least one known
 * key must have signed. Returns the text and the names of the keys whose signatures verified.
 */
export function openSignedNote(note: string, verifiers: readonly NoteVerifier[]): { text: string; verifiedBy: string[] } {
  const { text, signatures } = parseSignedNote(note);
  const message = utf8(text);
  const verifiedBy: string[] = [];
  for (const sig of signatures) {
    const known = verifiers.find((v) => v.keyName === sig.keyName && v.keyId === sig.keyId);
    if (!known) continue;
    if (!known.verify(message, sig.signature)) throw new NoteError(`the signature by ${sig.keyName} does not verify`);
    if (!verifiedBy.includes(sig.keyName)) verifiedBy.push(sig.keyName);
  }
  if (verifiedBy.length === 0) throw new NoteError('no signature by a known key');
  return { text, verifiedBy };
}

/** Checks that `text` can be the text of a note: UTF-8 without control characters, ending in a newline. */
export function checkNoteText(text: string): void {
  if (text.length < 2 || !text.endsWith('\n') || FORBIDDEN_CHARS.test(text)) {
    throw new NoteError('a note text is UTF-8 without control characters (other than newline) and ends with a newline');
  }
}

/** The signature line for a signature made over the note text with the key `keyName`/`keyId`. */
export function signatureLine(keyName: string, keyId: number, signature: Uint8Array): string {
  if (!isValidKeyName(keyName)) throw new NoteError('a key name must be non-empty, without spaces or "+"');
  const id = Uint8Array.of(keyId >>> 24, (keyId >>> 16) & 0xff, (keyId >>> 8) & 0xff, keyId & 0xff);
  return `${EM_DASH} ${keyName} ${toBase64(concatBytes(id, signature))}\n`;
}

/** The signed note: the text, a blank line, the signature lines. */
export function formatSignedNote(text: string, signatureLines: readonly string[]): string {
  checkNoteText(text);
  if (signatureLines.length === 0) throw new NoteError('a signed note has at least one signature');
  return `${text}\n${signatureLines.join('')}`;
}

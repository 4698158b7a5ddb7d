/**
 * What the domain needs from cryptography. The implementations (RFC 8785 canonical JSON,
 * SHA-256, Ed25519, ML-DSA-65) live in adapters-crypto; the domain never touches key material.
 */

/** Signature fields carried by every signed object (CONTRACT "Signed records"). */
export interface SignatureFields {
  keyId: string;
  signature: string;
  pqKeyId?: string;
  pqSignature?: string;
}

export type Signed<T> = T & SignatureFields;

export interface Hasher {
  /** Lower-case hex SHA-256 of the RFC 8785 canonical JSON of `value`. */
  contentHash(value: unknown): string;
  /** Lower-case hex SHA-256 of a UTF-8 string. */
  sha256Hex(text: string): string;
  /** RFC 8785 canonical JSON. */
  canonicalize(value: unknown): string;
}

/**
 * Signs records with the service's active key(s). The signature covers the canonical JSON of the
 * object with `signature` and `pqSignature` removed, so `keyId` and `pqKeyId` are signed too.
 */
export interface Signer {
  sign<T extends object>(record: T): Promise<Signed<T>>;
  /**
   * Base64 signature(s) over a detached string (the execution chain, attestations, the runtime
   * manifest, checkpoints). `'ed25519'`: the Ed25519 signature only, for a field that carries
   * nothing else; in hybrid mode it spares an ML-DSA-65 signature that would be dropped.
   */
  signText(text: string, only?: 'ed25519'): Promise<SignatureFields>;
}

export interface RecordVerification {
  valid: boolean;
  keyId?: string;
  errors: string[];
}

/** Verifies records against the service's published keys (every key that ever signed). */
export interface SignatureVerifier {
  verify(record: unknown): RecordVerification;
  verifyText(text: string, sig: SignatureFields): RecordVerification;
}

/** Verifies a step-up envelope signature made with a checker's own Ed25519 key (spec 2.6). */
export interface StepUpSignatureVerifier {
  verify(publicKeyPem: string, payload: unknown, signatureBase64: string): boolean;
  /**
   * The key a PEM holds, as a string that is equal for equal keys whatever the PEM's text (line
   * breaks, headers, spacing): two callers compare their keys by it. Undefined for no usable key.
   */
  publicKeyOf(publicKeyPem: string): string | undefined;
}

/** Where the service's signing keys are held (CONTRACT "Signing key providers"). */
export type SigningProviderKind = 'disk' | 'env' | 'pkcs11';

/** Which key provider signs; profile A's `/health` reports it as `signing_mode`. */
export interface SigningKeyCustody {
  readonly provider: SigningProviderKind;
}

/** A public signing key as published in the JWKS (never private material). */
export interface PublishedSigningKey {
  keyId: string;
  alg: 'Ed25519' | 'ML-DSA-65';
  /** Raw public key, base64url (the JWK `x` or `pub` member). */
  publicKey: string;
  /** The provider that held the key when it was first published. */
  provider: SigningProviderKind;
  /** ISO 8601: when the service first published it. */
  publishedAt: string;
}

/**
 * Remembers every public key the service published, so that a key rotated out of its provider (a
 * replaced environment value, a key removed from a module, a switch of provider) stays in the
 * JWKS and everything it signed keeps verifying.
 */
export interface PublishedKeyStore {
  /** Records the keys not recorded yet; a key already recorded keeps its first record. */
  remember(keys: readonly PublishedSigningKey[]): Promise<void>;
  /** Every recorded key, oldest first. */
  list(): Promise<PublishedSigningKey[]>;
}

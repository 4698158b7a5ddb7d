/**
 * The one signing port every key provider implements (CONTRACT "Signing key providers"): key
 * files in the data dir (`disk`), private keys injected as environment values (`env`), or keys
 * generated in and never leaving a PKCS#11 module (`pkcs11`). What is signed and how records
 * verify is the same for all three; only where the private key lives differs.
 */
import type { SigningProviderKind } from '@ets/domain';
import type { KeyAlgorithm } from './key-store.js';

export type SigningMode = 'ed25519' | 'hybrid';

export interface ActiveKeyIds {
  keyId: string;
  pqKeyId?: string;
}

export interface ProducedSignatures {
  /** Base64 Ed25519 signature. */
  signature: string;
  /** Base64 ML-DSA-65 signature, in hybrid mode. */
  pqSignature?: string;
}

/** The keys new signatures are made with, as one consistent snapshot (rotation swaps it whole). */
export interface ActiveSigningKeys extends ActiveKeyIds {
  sign(data: Uint8Array): Promise<ProducedSignatures>;
  /**
   * The base64 Ed25519 signature alone, for what carries no other (a compact JWS, a checkpoint, a
   * chain link): in hybrid mode `sign` would also make an ML-DSA-65 signature nobody keeps.
   */
  signEd25519(data: Uint8Array): Promise<string>;
}

/** A key and its metadata, as listed for operators (never private material). */
export interface KeyInfo {
  keyId: string;
  alg: KeyAlgorithm;
  /** ISO 8601; unknown for a key injected through the environment. */
  createdAt?: string;
  active: boolean;
}

/** A public key a provider holds, active or retired. */
export interface ProviderKey extends KeyInfo {
  /** Raw public key, base64url (the JWK `x` or `pub` member). */
  publicKey: string;
}

/**
 * What a rotation did. A provider that holds its keys makes the new key itself (`rotated`); the
 * environment provider cannot change the environment of a running service, so it hands the new
 * private keys to the operator, who installs them in the secret store and restarts (`handOver`).
 */
export type RotationOutcome =
  | { kind: 'rotated'; active: ActiveKeyIds }
  | { kind: 'handOver'; active: ActiveKeyIds; environment: Readonly<Record<string, string>> };

export interface KeyProvider {
  readonly kind: SigningProviderKind;
  readonly mode: SigningMode;
  /** Where the keys are, for operator messages (a directory, variable names, a module and token). */
  readonly location: string;
  readonly activeKeyIds: ActiveKeyIds;
  /** The current signing snapshot; hold it for one record so keyId and signature always match. */
  signingKeys(): ActiveSigningKeys;
  /** Every public key the provider holds, as last read (see `refresh`). */
  keys(): readonly ProviderKey[];
  /** Reads the public keys again: another process may have rotated. Never changes the signing key. */
  refresh(): Promise<void>;
  rotate(): Promise<RotationOutcome>;
  /** Releases what the provider holds open (module sessions). */
  close(): Promise<void>;
}

import type { RegistrationStore } from '../governance/registrations.js';

/** An active source; `registrationId` is the approved register change's id. */
export interface SignalSourceRegistration {
  registrationId: string;
  name: string;
  endpoint: string;
  /** Ed25519 public key (SPKI PEM) its answers are signed with; null: trusted by TLS alone. */
  publicKey: string | null;
  /** `ed25519:<base64url raw key>`, the `sourceKeyId` of its Trusted Signals; null without a key. */
  keyId: string | null;
  proposer: string;
  approvedBy: string;
  registeredAt: string;
}

/** Active business signal sources: at most one per name (the key of `active`). */
export interface SignalSourceStore extends RegistrationStore<SignalSourceRegistration> {}

/**
 * The Ed25519 keys of business signal sources. A key is named by a key id that carries the key
 * itself (`ed25519:<base64url of the 32-byte public key>`), so a Trusted Signal can be checked
 * offline with nothing but the record.
 */
export interface SourceProofVerifier {
  /** The key id of an Ed25519 public key in SPKI PEM form; undefined when the text is not one. */
  keyIdOf(publicKeyPem: string): string | undefined;
  /** True when `proof` is a base64 Ed25519 signature by the key `keyId` over the RFC 8785 canonical JSON of `statement`. Never throws. */
  verify(keyId: string, statement: unknown, proof: string): boolean;
}

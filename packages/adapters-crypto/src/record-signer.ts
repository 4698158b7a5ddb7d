import type { SignatureFields, Signed, Signer } from '@ets/domain';
import { canonicalize } from './canonical-json.js';
import type { ActiveSigningKeys } from './key-ring.js';

/** Anything that hands out the current signing keys (the KeyRing). */
export interface SigningKeySource {
  signingKeys(): ActiveSigningKeys;
}

/**
 * Signs records as CONTRACT "Signed records" describes: both signatures cover the canonical
 * JSON of the record with `signature` and `pqSignature` removed, so `keyId` and `pqKeyId` are
 * signed too.
 */
export class KeyRingSigner implements Signer {
  constructor(private readonly keys: SigningKeySource) {}

  async sign<T extends object>(record: T): Promise<Signed<T>> {
    // One snapshot per record: a rotation in between can never pair a keyId with another key's
    // signature.
    const active = this.keys.signingKeys();
    // Spread copies own properties with define semantics, so an own `__proto__` key stays data
    // (Object.assign would invoke the setter and drop it). Earlier signature fields are
    // removed so that re-signing in ed25519 mode does not leave a stale pqKeyId behind.
    const unsigned: Record<string, unknown> = { ...(record as Record<string, unknown>) };
    delete unsigned.signature;
    delete unsigned.pqSignature;
    delete unsigned.pqKeyId;
    unsigned.keyId = active.keyId;
    if (active.pqKeyId !== undefined) unsigned.pqKeyId = active.pqKeyId;

    const produced = active.sign(Buffer.from(canonicalize(unsigned), 'utf8'));
    const signed: Record<string, unknown> = { ...unsigned, signature: produced.signature };
    if (produced.pqSignature !== undefined) signed.pqSignature = produced.pqSignature;
    return signed as Signed<T>;
  }

  async signText(text: string): Promise<SignatureFields> {
    const active = this.keys.signingKeys();
    const produced = active.sign(Buffer.from(text, 'utf8'));
    const fields: SignatureFields = { keyId: active.keyId, signature: produced.signature };
    if (active.pqKeyId !== undefined && produced.pqSignature !== undefined) {
      fields.pqKeyId = active.pqKeyId;
      fields.pqSignature = produced.pqSignature;
    }
    return fields;
  }
}

import type { SignatureFields, Signed, Signer } from '@ets/domain';
import { canonicalize, canonicalMembers } from './canonical-json.js';
import type { ActiveSigningKeys } from './key-provider.js';

const signedTexts = new WeakMap<object, string>();

/**
 * The RFC 8785 canonical JSON text of a signed record: for an object KeyRingSigner signed, the text
 * of exactly what it signed (plus the signatures), kept from signing; else computed. Stores keep
 * this text as the record's body, so what is stored is what was signed even if the object were
 * changed afterwards, and its SHA-256 is the record's transparency-log leaf.
 */
export function canonicalJsonOf(record: object): string {
  return signedTexts.get(record) ?? canonicalize(record);
}

/** Anything that hands out the current signing keys (a KeyProvider, ServiceSigningKeys). */
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

    const { names, members } = canonicalMembers(unsigned);
    const produced = await active.sign(Buffer.from(`{${members.join(',')}}`, 'utf8'));
    const signed: Record<string, unknown> = { ...unsigned, signature: produced.signature };
    if (produced.pqSignature !== undefined) signed.pqSignature = produced.pqSignature;
    // The signed record's own canonical text, from the members already serialised: stores keep it
    // as the record's body and hash it as its transparency-log leaf without canonicalising again.
    const added: [string, string][] = [['signature', produced.signature]];
    if (produced.pqSignature !== undefined) added.push(['pqSignature', produced.pqSignature]);
    for (const [name, value] of added) {
      let at = 0;
      while (at < names.length && names[at]! < name) at++;
      names.splice(at, 0, name);
      members.splice(at, 0, `${JSON.stringify(name)}:${JSON.stringify(value)}`);
    }
    signedTexts.set(signed, `{${members.join(',')}}`);
    return signed as Signed<T>;
  }

  async signText(text: string, only?: 'ed25519'): Promise<SignatureFields> {
    const active = this.keys.signingKeys();
    if (only === 'ed25519') return { keyId: active.keyId, signature: await active.signEd25519(Buffer.from(text, 'utf8')) };
    const produced = await active.sign(Buffer.from(text, 'utf8'));
    const fields: SignatureFields = { keyId: active.keyId, signature: produced.signature };
    if (active.pqKeyId !== undefined && produced.pqSignature !== undefined) {
      fields.pqKeyId = active.pqKeyId;
      fields.pqSignature = produced.pqSignature;
    }
    return fields;
  }
}

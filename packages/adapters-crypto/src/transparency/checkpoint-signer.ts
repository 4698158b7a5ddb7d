import type { CheckpointSigner, LogCheckpoint, Signer, TreeHead } from '@ets/domain';
import { fromBase64, fromBase64Url, fromHex } from './bytes.js';
import { CheckpointError, formatCheckpoint } from './checkpoint.js';
import { ed25519NoteKeyId, formatSignedNote, signatureLine } from './signed-note.js';

/** Where the signer finds the public half of the key that signed (the KeyRing's `publicKey`). */
export interface PublicKeyDirectory {
  publicKey(kid: string): { kty: string; x?: string } | undefined;
}

/**
 * Signs checkpoints through the service's `Signer` (the key ring's active Ed25519 key: Ed25519
 * signs the note text itself, which is what `signText` signs). The note's key name is the key's
 * `kid`, and its key ID is derived from that name and the public key in the JWKS, so an auditor
 * needs nothing but the JWKS. Ed25519 only, also in hybrid mode: signed-note has no type for an
 * ML-DSA-65 signature.
 */
export class NoteCheckpointSigner implements CheckpointSigner {
  constructor(
    readonly origin: string,
    private readonly signer: Signer,
    private readonly keys: PublicKeyDirectory,
  ) {
    formatCheckpoint({ origin, treeSize: 0, rootHash: new Uint8Array(32) }); // rejects a bad origin now, not at the first checkpoint
  }

  async sign(head: TreeHead): Promise<LogCheckpoint> {
    const rootHash = fromHex(head.rootHash);
    if (!rootHash) throw new CheckpointError('the root hash must be lower-case hex');
    const text = formatCheckpoint({ origin: this.origin, treeSize: head.treeSize, rootHash });
    const produced = await this.signer.signText(text, 'ed25519');
    const jwk = this.keys.publicKey(produced.keyId);
    const publicKey = jwk?.kty === 'OKP' ? fromBase64Url(jwk.x) : undefined;
    const signature = fromBase64(produced.signature);
    if (!publicKey || publicKey.length !== 32 || signature?.length !== 64) {
      throw new CheckpointError(`the signing key ${produced.keyId} is not a published Ed25519 key`);
    }
    const line = signatureLine(produced.keyId, ed25519NoteKeyId(produced.keyId, publicKey), signature);
    return { origin: this.origin, treeSize: head.treeSize, rootHash: head.rootHash, keyId: produced.keyId, note: formatSignedNote(text, [line]) };
  }
}

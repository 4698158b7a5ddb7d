/**
 * The `disk` key provider: the service's own signing keys in the data dir, generated on first
 * start, loaded once into memory, rotated on demand. Only public parts ever leave this module;
 * private keys live in closures and private fields and are used through `signingKeys().sign()`.
 */
import { existsSync } from 'node:fs';
import type { SigningProviderKind } from '@ets/domain';
import { HybridKeyMissingError, KeyFilesMissingError, KeyRingError } from './errors.js';
import { frozenJwks, keyIdOf, type PublicJwk, type PublicJwkSet } from './jwk.js';
import type { ActiveKeyIds, ActiveSigningKeys, KeyProvider, ProviderKey, RotationOutcome, SigningMode } from './key-provider.js';
import { KeyStore, type KeyAlgorithm, type KeyRecord } from './key-store.js';
import { generateEd25519, generateMlDsa65, localSigningKeys, parseEd25519Pem, parseMlDsa65Pem } from './local-keys.js';
import type { MlDsa65PrivateKey } from './ml-dsa65.js';

export type { ActiveKeyIds, ActiveSigningKeys, KeyInfo, ProducedSignatures, SigningMode } from './key-provider.js';

export interface KeyRingOptions {
  dataDir: string;
  mode: SigningMode;
  /**
   * Hybrid mode over a data dir that has never held an ML-DSA-65 key: generate one instead of
   * refusing to start. Off by default so that a lost key file is never papered over.
   */
  addMissingPqKey?: boolean;
  /**
   * Opened to rotate (`ets signing-keys rotate`): in hybrid mode a data dir with no usable ML-DSA-65
   * key (one made in ed25519 mode, or one whose key file is lost) is loaded with its Ed25519 key
   * alone, and the rotation makes both. This is how an existing data dir switches to hybrid signing.
   */
  forRotation?: boolean;
}

interface LoadedState {
  records: KeyRecord[];
  signing: ActiveSigningKeys;
  jwks: PublicJwkSet;
  byKid: Map<string, PublicJwk>;
}

export class KeyRing implements KeyProvider {
  readonly kind: SigningProviderKind = 'disk';
  readonly #store: KeyStore;
  readonly #mode: SigningMode;
  #state: LoadedState;

  private constructor(store: KeyStore, mode: SigningMode, state: LoadedState) {
    this.#store = store;
    this.#mode = mode;
    this.#state = state;
  }

  /**
   * Opens the key ring under `<dataDir>/keys`, generating the first keys on a fresh data dir.
   * Throws a KeyRingError (HybridKeyMissingError, KeyFilesMissingError) when the files on disk
   * cannot serve the requested mode.
   */
  static async open(options: KeyRingOptions): Promise<KeyRing> {
    if (options.mode !== 'ed25519' && options.mode !== 'hybrid') {
      throw new KeyRingError(`unknown signing mode ${JSON.stringify(options.mode)} (expected ed25519 or hybrid)`);
    }
    const store = new KeyStore(options.dataDir);
    await store.ensureDir();
    let records = await store.readMetadata();
    if (records === undefined) {
      records = await store.withLock(async () => {
        const current = await store.readMetadata();
        if (current) return current;
        const orphans = await store.listPrivateKeyFiles();
        if (orphans.length > 0) {
          throw new KeyRingError(
            `${store.metadataPath} is missing but ${store.dir} holds key files (${orphans.join(', ')}); ` +
              'refusing to generate new keys, which would change the keyId. Restore keys.json.',
          );
        }
        return generateAndSave(store, [], options.mode === 'hybrid' ? ['Ed25519', 'ML-DSA-65'] : ['Ed25519']);
      });
    }
    if (options.mode === 'hybrid' && options.addMissingPqKey && !records.some((r) => r.alg === 'ML-DSA-65')) {
      records = await store.withLock(async () => {
        const current = (await store.readMetadata()) ?? [];
        if (current.some((r) => r.alg === 'ML-DSA-65')) return current;
        return generateAndSave(store, current, ['ML-DSA-65']);
      });
    }
    let state: LoadedState;
    try {
      state = await loadState(store, records, options.mode);
    } catch (e) {
      if (!(options.forRotation && e instanceof HybridKeyMissingError)) throw e;
      state = await loadState(store, records, 'ed25519');
    }
    return new KeyRing(store, options.mode, state);
  }

  /** Whether `<dataDir>/keys` holds a key ring: listing keys must not generate the first ones. */
  static exists(dataDir: string): boolean {
    return existsSync(new KeyStore(dataDir).metadataPath);
  }

  get mode(): SigningMode {
    return this.#mode;
  }

  /** Directory holding the key files (for operator messages). */
  get location(): string {
    return this.#store.dir;
  }

  get activeKeyIds(): ActiveKeyIds {
    const { keyId, pqKeyId } = this.#state.signing;
    return pqKeyId === undefined ? { keyId } : { keyId, pqKeyId };
  }

  /** The current signing snapshot; hold it for one record so keyId and signature always match. */
  signingKeys(): ActiveSigningKeys {
    return this.#state.signing;
  }

  /** Every key in keys.json, active or retired. The object is frozen and replaced on rotation. */
  jwks(): PublicJwkSet {
    return this.#state.jwks;
  }

  /** One key of keys.json, or undefined. */
  publicKey(kid: string): PublicJwk | undefined {
    return this.#state.byKid.get(kid);
  }

  keys(): ProviderKey[] {
    return this.#state.records.map(({ keyId, alg, createdAt, active, publicKey }) => ({ keyId, alg, createdAt, active, publicKey }));
  }

  /**
   * Makes a new active key (both algorithms in hybrid mode) and retires the previous one, which
   * stays published so that everything it signed keeps verifying.
   */
  async rotate(): Promise<RotationOutcome> {
    const algs: KeyAlgorithm[] = this.#mode === 'hybrid' ? ['Ed25519', 'ML-DSA-65'] : ['Ed25519'];
    const records = await this.#store.withLock(async () => {
      const current = (await this.#store.readMetadata()) ?? this.#state.records;
      return generateAndSave(this.#store, current, algs);
    });
    this.#state = await loadState(this.#store, records, this.#mode);
    return { kind: 'rotated', active: this.activeKeyIds };
  }

  /** Re-reads keys.json for its public keys; the signing key changes only on restart or on a rotation by this process. */
  async refresh(): Promise<void> {
    const records = await this.#store.readMetadata();
    if (!records) return;
    await checkKeyIds(this.#store, records);
    this.#state = { ...this.#state, ...publication(records) };
  }

  async close(): Promise<void> {}
}

async function generateAndSave(
  store: KeyStore,
  existing: readonly KeyRecord[],
  algs: readonly KeyAlgorithm[],
): Promise<KeyRecord[]> {
  const createdAt = new Date().toISOString();
  const records = [...existing];
  for (const alg of algs) {
    const generated = alg === 'Ed25519' ? await generateEd25519() : await generateMlDsa65();
    // The private key file goes first: metadata never names a key that is not on disk.
    await store.writePrivateKey(generated.keyId, generated.pem);
    for (const record of records) if (record.alg === alg) record.active = false;
    records.push({ keyId: generated.keyId, alg, createdAt, active: true, publicKey: generated.publicKey });
  }
  await store.writeMetadata(records);
  return records;
}

async function loadState(store: KeyStore, records: KeyRecord[], mode: SigningMode): Promise<LoadedState> {
  await checkKeyIds(store, records);

  const edRecord = activeRecord(store, records, 'Ed25519');
  if (!edRecord) throw new KeyRingError(`${store.metadataPath} has no active Ed25519 key`);
  const edPem = await store.readPrivateKey(edRecord.keyId);
  if (edPem === undefined) {
    const file = store.privateKeyPath(edRecord.keyId);
    throw new KeyFilesMissingError(`the active Ed25519 signing key file is missing: ${file}`, [file]);
  }
  const edFile = store.privateKeyPath(edRecord.keyId);
  const ed = parseEd25519Pem(edPem);
  if (!ed) throw new KeyRingError(`${edFile} is not an Ed25519 private key (PKCS#8 PEM)`);
  if (ed.publicKey !== edRecord.publicKey) throw new KeyRingError(`${edFile} does not match key ${edRecord.keyId}`);

  let pq: { keyId: string; key: MlDsa65PrivateKey } | undefined;
  if (mode === 'hybrid') {
    const pqRecord = activeRecord(store, records, 'ML-DSA-65');
    const pqPem = pqRecord ? await store.readPrivateKey(pqRecord.keyId) : undefined;
    if (!pqRecord || pqPem === undefined) {
      const file = pqRecord ? store.privateKeyPath(pqRecord.keyId) : `${store.dir}/mldsa65-<keyId>.pem`;
      const why = pqRecord ? `its key file is missing: ${file}` : `${store.metadataPath} lists no active ML-DSA-65 key (expected ${file})`;
      throw new HybridKeyMissingError(
        `refusing to start in hybrid signing mode: the data dir has Ed25519 signing keys but no usable ML-DSA-65 key; ${why}. ` +
          'Restore the missing file, add a key with SVC_SIGNING_MODE=hybrid ets signing-keys rotate, or start in ed25519 mode.',
        [file],
      );
    }
    const pqFile = store.privateKeyPath(pqRecord.keyId);
    const parsed = parseMlDsa65Pem(pqPem);
    if (!parsed) throw new KeyRingError(`${pqFile} is not a seed-form ML-DSA-65 private key`);
    if (parsed.publicKey !== pqRecord.publicKey) throw new KeyRingError(`${pqFile} does not match key ${pqRecord.keyId}`);
    pq = { keyId: pqRecord.keyId, key: parsed.key };
  }

  return { ...publication(records), signing: localSigningKeys(edRecord.keyId, ed.key, pq) };
}

/** A keyId is a function of its public key; a mismatch means keys.json was edited or damaged. */
async function checkKeyIds(store: KeyStore, records: readonly KeyRecord[]): Promise<void> {
  for (const record of records) {
    if ((await keyIdOf(record)) !== record.keyId) {
      throw new KeyRingError(`${store.metadataPath}: keyId ${record.keyId} does not match its public key`);
    }
  }
}

function publication(records: readonly KeyRecord[]): Omit<LoadedState, 'signing'> {
  const jwks = frozenJwks(records);
  return { records: records.map((r) => ({ ...r })), jwks, byKid: new Map(jwks.keys.map((k) => [k.kid, k])) };
}

function activeRecord(store: KeyStore, records: readonly KeyRecord[], alg: KeyAlgorithm): KeyRecord | undefined {
  const active = records.filter((r) => r.alg === alg && r.active);
  if (active.length > 1) throw new KeyRingError(`${store.metadataPath} marks more than one ${alg} key active`);
  return active[0];
}

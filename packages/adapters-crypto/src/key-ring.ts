/**
 * The service's own signing keys: generated on first start, loaded once into memory, rotated
 * on demand. Only public parts ever leave this module; private keys live in closures and private
 * fields and are used through `signingKeys().sign()`.
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign as nodeSign, type KeyObject } from 'node:crypto';
import { encodeBase64, encodeBase64Url } from './base64.js';
import { HybridKeyMissingError, KeyFilesMissingError, KeyRingError } from './errors.js';
import {
  ed25519Jwk,
  ed25519KeyId,
  mlDsa65Jwk,
  mlDsa65KeyId,
  type PublicJwk,
  type PublicJwkSet,
} from './jwk.js';
import { KeyStore, type KeyAlgorithm, type KeyRecord } from './key-store.js';
import { mlDsa65, pkcs8PemToSeed, seedToPkcs8Pem, type MlDsa65PrivateKey } from './ml-dsa65.js';

export type SigningMode = 'ed25519' | 'hybrid';

export interface KeyRingOptions {
  dataDir: string;
  mode: SigningMode;
  /**
   * Hybrid mode over a data dir that has never held an ML-DSA-65 key: generate one instead of
   * refusing to start. Off by default so that a lost key file is never papered over.
   */
  addMissingPqKey?: boolean;
}

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
  sign(data: Uint8Array): ProducedSignatures;
}

/** A published key and its metadata, as listed for operators (never private material). */
export interface KeyInfo {
  keyId: string;
  alg: KeyAlgorithm;
  createdAt: string;
  active: boolean;
}

interface LoadedState {
  records: KeyRecord[];
  signing: ActiveSigningKeys;
  jwks: PublicJwkSet;
  byKid: Map<string, PublicJwk>;
}

export class KeyRing {
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
    return new KeyRing(store, options.mode, await loadState(store, records, options.mode));
  }

  get mode(): SigningMode {
    return this.#mode;
  }

  /** Directory holding the key files (for operator messages). */
  get directory(): string {
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

  /** Every published key, active or retired. The object is frozen and replaced on rotation. */
  jwks(): PublicJwkSet {
    return this.#state.jwks;
  }

  /** One published key (GET /keys/{keyId}), or undefined. */
  publicKey(kid: string): PublicJwk | undefined {
    return this.#state.byKid.get(kid);
  }

  keys(): KeyInfo[] {
    return this.#state.records.map(({ keyId, alg, createdAt, active }) => ({ keyId, alg, createdAt, active }));
  }

  /**
   * Makes a new active key (both algorithms in hybrid mode) and retires the previous one, which
   * stays published so that everything it signed keeps verifying.
   */
  async rotate(): Promise<ActiveKeyIds> {
    const algs: KeyAlgorithm[] = this.#mode === 'hybrid' ? ['Ed25519', 'ML-DSA-65'] : ['Ed25519'];
    const records = await this.#store.withLock(async () => {
      const current = (await this.#store.readMetadata()) ?? this.#state.records;
      return generateAndSave(this.#store, current, algs);
    });
    this.#state = await loadState(this.#store, records, this.#mode);
    return this.activeKeyIds;
  }

  /** Re-reads the key files, e.g. after another process sharing the data dir rotated. */
  async reload(): Promise<void> {
    const records = await this.#store.readMetadata();
    if (!records) throw new KeyRingError(`${this.#store.metadataPath} has disappeared`);
    this.#state = await loadState(this.#store, records, this.#mode);
  }
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

async function generateEd25519(): Promise<{ keyId: string; publicKey: string; pem: string }> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const x = ed25519X(publicKey);
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return { keyId: await ed25519KeyId(x), publicKey: x, pem };
}

async function generateMlDsa65(): Promise<{ keyId: string; publicKey: string; pem: string }> {
  const seed = randomBytes(32);
  const pub = encodeBase64Url(mlDsa65().privateKeyFromSeed(seed).publicKey);
  return { keyId: await mlDsa65KeyId(pub), publicKey: pub, pem: seedToPkcs8Pem(seed) };
}

async function loadState(store: KeyStore, records: KeyRecord[], mode: SigningMode): Promise<LoadedState> {
  // A keyId is a function of its public key; a mismatch means keys.json was edited or damaged.
  for (const record of records) {
    const expected = record.alg === 'Ed25519' ? await ed25519KeyId(record.publicKey) : await mlDsa65KeyId(record.publicKey);
    if (expected !== record.keyId) {
      throw new KeyRingError(`${store.metadataPath}: keyId ${record.keyId} does not match its public key`);
    }
  }

  const edRecord = activeRecord(store, records, 'Ed25519');
  if (!edRecord) throw new KeyRingError(`${store.metadataPath} has no active Ed25519 key`);
  const edPem = await store.readPrivateKey(edRecord.keyId);
  if (edPem === undefined) {
    const file = store.privateKeyPath(edRecord.keyId);
    throw new KeyFilesMissingError(`the active Ed25519 signing key file is missing: ${file}`, [file]);
  }
  const edKey = loadEd25519(store, edRecord, edPem);

  let pq: { record: KeyRecord; key: MlDsa65PrivateKey } | undefined;
  if (mode === 'hybrid') {
    const pqRecord = activeRecord(store, records, 'ML-DSA-65');
    const pqPem = pqRecord ? await store.readPrivateKey(pqRecord.keyId) : undefined;
    if (!pqRecord || pqPem === undefined) {
      const file = pqRecord ? store.privateKeyPath(pqRecord.keyId) : `${store.dir}/mldsa65-<keyId>.pem`;
      const why = pqRecord ? `its key file is missing: ${file}` : `${store.metadataPath} lists no active ML-DSA-65 key (expected ${file})`;
      throw new HybridKeyMissingError(
        `refusing to start in hybrid signing mode: the data dir has Ed25519 signing keys but no usable ML-DSA-65 key; ${why}. ` +
          'Restore the missing file, or start in ed25519 mode.',
        [file],
      );
    }
    pq = { record: pqRecord, key: loadMlDsa65(store, pqRecord, pqPem) };
  }

  const signing = makeSigningKeys(edRecord.keyId, edKey, pq);
  const keys = records.map((r) => Object.freeze(r.alg === 'Ed25519' ? ed25519Jwk(r.publicKey, r.keyId) : mlDsa65Jwk(r.publicKey, r.keyId)));
  const jwks = Object.freeze({ keys: Object.freeze(keys) }) as unknown as PublicJwkSet;
  return {
    records: records.map((r) => ({ ...r })),
    signing,
    jwks,
    byKid: new Map(keys.map((k) => [k.kid, k])),
  };
}

function activeRecord(store: KeyStore, records: readonly KeyRecord[], alg: KeyAlgorithm): KeyRecord | undefined {
  const active = records.filter((r) => r.alg === alg && r.active);
  if (active.length > 1) throw new KeyRingError(`${store.metadataPath} marks more than one ${alg} key active`);
  return active[0];
}

function loadEd25519(store: KeyStore, record: KeyRecord, pem: string): KeyObject {
  const file = store.privateKeyPath(record.keyId);
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    throw new KeyRingError(`${file} is not a readable private key`);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new KeyRingError(`${file} is not an Ed25519 private key`);
  if (ed25519X(key) !== record.publicKey) throw new KeyRingError(`${file} does not match key ${record.keyId}`);
  return key;
}

function loadMlDsa65(store: KeyStore, record: KeyRecord, pem: string): MlDsa65PrivateKey {
  const file = store.privateKeyPath(record.keyId);
  let key: MlDsa65PrivateKey;
  try {
    key = mlDsa65().privateKeyFromSeed(pkcs8PemToSeed(pem));
  } catch {
    throw new KeyRingError(`${file} is not a seed-form ML-DSA-65 private key`);
  }
  if (encodeBase64Url(key.publicKey) !== record.publicKey) {
    throw new KeyRingError(`${file} does not match key ${record.keyId}`);
  }
  return key;
}

function makeSigningKeys(
  keyId: string,
  edKey: KeyObject,
  pq: { record: KeyRecord; key: MlDsa65PrivateKey } | undefined,
): ActiveSigningKeys {
  if (!pq) {
    return Object.freeze({
      keyId,
      sign: (data: Uint8Array): ProducedSignatures => ({ signature: nodeSign(null, data, edKey).toString('base64') }),
    });
  }
  const pqKey = pq.key;
  return Object.freeze({
    keyId,
    pqKeyId: pq.record.keyId,
    sign: (data: Uint8Array): ProducedSignatures => ({
      signature: nodeSign(null, data, edKey).toString('base64'),
      pqSignature: encodeBase64(pqKey.sign(data)),
    }),
  });
}

function ed25519X(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new KeyRingError('Ed25519 key without a public part');
  return jwk.x;
}

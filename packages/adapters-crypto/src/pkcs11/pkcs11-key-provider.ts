/**
 * The `pkcs11` key provider: Ed25519 keys generated in a PKCS#11 module (an HSM, or SoftHSM2)
 * and never leaving it: private keys are sensitive and not extractable; this process holds only
 * object handles and public keys. Signatures are CKM_EDDSA, byte-for-byte what the other
 * providers produce, so records verify the same way.
 *
 * Keys on the token: a key pair per rotation, both halves labelled `ets-signing <ISO time>` and
 * sharing a random CKA_ID; the newest is the active one. Older pairs stay on the token and
 * published. The keyId derives from the public key as for the other providers, so it is the
 * same after every restart and on every instance using the token.
 */
import { randomBytes } from 'node:crypto';
import type { SigningProviderKind } from '@ets/domain';
import { encodeBase64Url } from '../base64.js';
import { KeyRingError } from '../errors.js';
import { ed25519KeyId } from '../jwk.js';
import { nodeVerifyCrypto } from '../node-verify-crypto.js';
import type { ActiveKeyIds, ActiveSigningKeys, KeyProvider, ProviderKey, RotationOutcome, SigningMode } from '../key-provider.js';
import {
  CKK_EC_EDWARDS,
  CKM_EC_EDWARDS_KEY_PAIR_GEN,
  CKM_EDDSA,
  codeOf,
  findTokenSlot,
  login,
  openModule,
  type Handle,
  type OpenedModule,
  type Pkcs11js,
} from './module.js';
import { SessionPool } from './session-pool.js';

export interface Pkcs11KeyProviderOptions {
  /** Path of the module's shared library (SVC_PKCS11_MODULE). */
  module: string;
  /** Token label (SVC_PKCS11_TOKEN). */
  token: string;
  /** User PIN (SVC_PKCS11_PIN or the content of SVC_PKCS11_PIN_FILE). */
  pin: string;
  mode: SigningMode;
  /**
   * Most sessions open at once, i.e. concurrent signatures. Default: the size of libuv's thread
   * pool (UV_THREADPOOL_SIZE, 4 unless set), which runs the signatures: more would only queue.
   */
  sessions?: number;
}

const LABEL_PREFIX = 'ets-signing ';
/** DER OID 1.3.101.112 (id-Ed25519): CKA_EC_PARAMS of an Ed25519 key. */
const ED25519_EC_PARAMS = Buffer.from('06032b6570', 'hex');
const ED25519_SIGNATURE_BYTES = 64;
const SELF_CHECK = Buffer.from('ets signing key check', 'utf8');

/**
 * A signing key signs and does nothing else. Left out of the template, usages take the module's
 * defaults, and SoftHSM2 (like many modules) lets a private key decrypt and unwrap too: a key
 * that can be used for what it was not made for (an unwrap oracle, a decrypt oracle) is a key
 * whose signatures prove less. Each usage is set false explicitly.
 */
const NO_OTHER_USE = {
  private: (b: Pkcs11js) => [b.CKA_DECRYPT, b.CKA_UNWRAP, b.CKA_DERIVE, b.CKA_SIGN_RECOVER].map((type) => ({ type, value: false })),
  public: (b: Pkcs11js) => [b.CKA_ENCRYPT, b.CKA_WRAP, b.CKA_DERIVE, b.CKA_VERIFY_RECOVER].map((type) => ({ type, value: false })),
};

interface TokenKey extends ProviderKey {
  /** CKA_ID shared by the public and the private object. */
  id: Buffer;
}

export class Pkcs11KeyProvider implements KeyProvider {
  readonly kind: SigningProviderKind = 'pkcs11';
  readonly mode: SigningMode = 'ed25519';
  readonly location: string;
  readonly #module: OpenedModule;
  readonly #pool: SessionPool;
  #keys: readonly TokenKey[] = [];
  #signing!: ActiveSigningKeys;

  private constructor(module: OpenedModule, slot: Handle, options: Pkcs11KeyProviderOptions) {
    this.#module = module;
    this.location = `token ${JSON.stringify(options.token)} of ${options.module}`;
    const { binding, lib } = module;
    // Login state belongs to the application, not the session: one login covers every session the
    // pool opens. It is repeated only when the module has logged the application out (all its
    // sessions closed, or the module said so).
    let loggedIn = false;
    this.#pool = new SessionPool(
      () => {
        const session = lib.C_OpenSession(slot, binding.CKF_SERIAL_SESSION | binding.CKF_RW_SESSION);
        if (!loggedIn || this.#pool.openSessions === 0) {
          try {
            login(module, session, options.token, options.pin);
          } catch (e) {
            lib.C_CloseSession(session);
            throw e;
          }
          loggedIn = true;
        }
        return session;
      },
      (session) => lib.C_CloseSession(session),
      options.sessions ?? threadPoolSize(),
      (error) => {
        if (codeOf(error) === binding.CKR_USER_NOT_LOGGED_IN) loggedIn = false;
      },
    );
  }

  /**
   * Opens the module, finds the token, logs in once and loads the active key (generating the
   * first one on a token that holds none). Throws a Pkcs11SetupError naming the setting at fault.
   */
  static async open(options: Pkcs11KeyProviderOptions): Promise<Pkcs11KeyProvider> {
    if (options.mode !== 'ed25519') {
      throw new KeyRingError('hybrid signing cannot use the pkcs11 key provider: the module holds Ed25519 keys only. Use SVC_SIGNING_MODE=ed25519, or the disk or env provider.');
    }
    const module = openModule(options.module);
    let provider: Pkcs11KeyProvider | undefined;
    try {
      provider = new Pkcs11KeyProvider(module, findTokenSlot(module, options.module, options.token), options);
      await provider.#load(true);
      return provider;
    } catch (e) {
      if (provider) provider.#pool.close();
      module.release();
      throw e;
    }
  }

  get activeKeyIds(): ActiveKeyIds {
    return { keyId: this.#signing.keyId };
  }

  /** Sessions open on the module now (at most the pool size). */
  get openSessions(): number {
    return this.#pool.openSessions;
  }

  signingKeys(): ActiveSigningKeys {
    return this.#signing;
  }

  keys(): readonly ProviderKey[] {
    return this.#keys.map(({ id: _id, ...key }) => key);
  }

  /** Reads the token's keys again (another process may have rotated); keeps the signing key. */
  async refresh(): Promise<void> {
    const keys = await this.#pool.use((session) => this.#readKeys(session));
    const signingKeyId = this.#signing.keyId;
    this.#keys = keys.map((k) => ({ ...k, active: k.keyId === signingKeyId }));
  }

  /** Generates a new key pair in the token and signs with it from now on. */
  async rotate(): Promise<RotationOutcome> {
    await this.#pool.use((session) => this.#generate(session));
    await this.#load(false);
    return { kind: 'rotated', active: this.activeKeyIds };
  }

  async close(): Promise<void> {
    this.#pool.close();
    this.#module.release();
  }

  async #load(generateIfNone: boolean): Promise<void> {
    let keys = await this.#pool.use((session) => this.#readKeys(session));
    if (keys.length === 0 && generateIfNone) {
      await this.#pool.use((session) => this.#generate(session));
      keys = await this.#pool.use((session) => this.#readKeys(session));
    }
    const active = newest(keys);
    if (!active) throw new KeyRingError(`the ${this.location} holds no ${LABEL_PREFIX.trim()} key`);
    const privateKey = await this.#pool.use((session) => this.#privateKeyOf(session, active));
    const signing = this.#signingKeys(active, privateKey);
    await selfCheck(signing, active);
    this.#keys = keys.map((k) => ({ ...k, active: k.keyId === active.keyId }));
    this.#signing = signing;
  }

  #signingKeys(key: TokenKey, privateKey: Handle): ActiveSigningKeys {
    const { binding, lib } = this.#module;
    // Object handles live as long as the module's state; after a module reset the key is found
    // again by its CKA_ID for the next signature.
    let handle: Handle | undefined = privateKey;
    const signEd25519 = (data: Uint8Array): Promise<string> =>
      this.#pool.use(async (session) => {
        handle ??= this.#privateKeyOf(session, key);
        try {
          lib.C_SignInit(session, { mechanism: CKM_EDDSA }, handle);
          // Off the event loop: a network HSM may take milliseconds per signature.
          const signature = await lib.C_SignAsync(session, Buffer.from(data.buffer, data.byteOffset, data.byteLength), Buffer.alloc(ED25519_SIGNATURE_BYTES));
          return signature.toString('base64');
        } catch (e) {
          if (codeOf(e) === binding.CKR_KEY_HANDLE_INVALID || codeOf(e) === binding.CKR_OBJECT_HANDLE_INVALID) handle = undefined;
          throw e;
        }
      });
    return Object.freeze({
      keyId: key.keyId,
      sign: async (data: Uint8Array) => ({ signature: await signEd25519(data) }),
      signEd25519,
    });
  }

  async #generate(session: Handle): Promise<void> {
    const { binding, lib } = this.#module;
    const label = `${LABEL_PREFIX}${new Date().toISOString()}`;
    const id = randomBytes(16);
    const common = [
      { type: binding.CKA_KEY_TYPE, value: CKK_EC_EDWARDS },
      { type: binding.CKA_TOKEN, value: true },
      { type: binding.CKA_LABEL, value: label },
      { type: binding.CKA_ID, value: id },
    ];
    await lib.C_GenerateKeyPairAsync(
      session,
      { mechanism: CKM_EC_EDWARDS_KEY_PAIR_GEN },
      [
        { type: binding.CKA_CLASS, value: binding.CKO_PUBLIC_KEY },
        ...common,
        { type: binding.CKA_PRIVATE, value: false },
        { type: binding.CKA_VERIFY, value: true },
        ...NO_OTHER_USE.public(binding),
        { type: binding.CKA_EC_PARAMS, value: ED25519_EC_PARAMS },
      ],
      [
        { type: binding.CKA_CLASS, value: binding.CKO_PRIVATE_KEY },
        ...common,
        { type: binding.CKA_PRIVATE, value: true },
        { type: binding.CKA_SIGN, value: true },
        ...NO_OTHER_USE.private(binding),
        // The private key never leaves the module, not even wrapped.
        { type: binding.CKA_SENSITIVE, value: true },
        { type: binding.CKA_EXTRACTABLE, value: false },
      ],
    );
  }

  async #readKeys(session: Handle): Promise<TokenKey[]> {
    const { binding, lib } = this.#module;
    const handles = findObjects(this.#module, session, [
      { type: binding.CKA_CLASS, value: binding.CKO_PUBLIC_KEY },
      { type: binding.CKA_KEY_TYPE, value: CKK_EC_EDWARDS },
    ]);
    const keys: TokenKey[] = [];
    for (const handle of handles) {
      const [label, id, point] = lib.C_GetAttributeValue(session, handle, [
        { type: binding.CKA_LABEL },
        { type: binding.CKA_ID },
        { type: binding.CKA_EC_POINT },
      ]);
      const labelText = Buffer.isBuffer(label?.value) ? label.value.toString('utf8') : '';
      if (!labelText.startsWith(LABEL_PREFIX) || !Buffer.isBuffer(id?.value) || !Buffer.isBuffer(point?.value)) continue;
      const raw = ed25519PointBytes(point.value);
      if (!raw) throw new KeyRingError(`the ${this.location} holds a key labelled ${JSON.stringify(labelText)} whose public point is not an Ed25519 key`);
      const publicKey = encodeBase64Url(raw);
      keys.push({
        keyId: await ed25519KeyId(publicKey),
        alg: 'Ed25519',
        createdAt: labelText.slice(LABEL_PREFIX.length),
        active: false,
        publicKey,
        id: Buffer.from(id.value),
      });
    }
    return keys.sort(byCreation);
  }

  #privateKeyOf(session: Handle, key: TokenKey): Handle {
    const { binding } = this.#module;
    const [handle] = findObjects(this.#module, session, [
      { type: binding.CKA_CLASS, value: binding.CKO_PRIVATE_KEY },
      { type: binding.CKA_KEY_TYPE, value: CKK_EC_EDWARDS },
      { type: binding.CKA_ID, value: key.id },
    ]);
    if (!handle) throw new KeyRingError(`the ${this.location} holds the public key ${key.keyId} but not its private key`);
    return handle;
  }
}

function threadPoolSize(): number {
  const size = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(size) && size >= 1 ? Math.min(size, 1024) : 4;
}

function findObjects(module: OpenedModule, session: Handle, template: { type: number; value: number | boolean | Buffer }[]): Handle[] {
  const { lib } = module;
  lib.C_FindObjectsInit(session, template);
  try {
    const found: Handle[] = [];
    for (;;) {
      const batch = lib.C_FindObjects(session, 64);
      if (batch.length === 0) return found;
      found.push(...batch);
    }
  } finally {
    lib.C_FindObjectsFinal(session);
  }
}

/** CKA_EC_POINT of an Ed25519 key: the 32 raw bytes, DER-wrapped in an OCTET STRING by most modules. */
function ed25519PointBytes(point: Buffer): Buffer | undefined {
  if (point.length === 34 && point[0] === 0x04 && point[1] === 0x20) return point.subarray(2);
  if (point.length === 32) return point;
  return undefined;
}

/** Oldest first; keys made in the same millisecond are ordered by keyId, so "newest" is stable. */
function byCreation(a: ProviderKey, b: ProviderKey): number {
  const byTime = (a.createdAt ?? '').localeCompare(b.createdAt ?? '');
  return byTime !== 0 ? byTime : a.keyId.localeCompare(b.keyId);
}

function newest(keys: readonly TokenKey[]): TokenKey | undefined {
  return keys[keys.length - 1];
}

/** The private object found by CKA_ID must be the public key's other half, or nothing would verify. */
async function selfCheck(signing: ActiveSigningKeys, key: ProviderKey): Promise<void> {
  const { signature } = await signing.sign(SELF_CHECK);
  const verify = nodeVerifyCrypto.ed25519(Buffer.from(key.publicKey, 'base64url'));
  if (!verify(SELF_CHECK, Buffer.from(signature, 'base64'))) {
    throw new KeyRingError(`the private key of ${key.keyId} in the module does not match its public key`);
  }
}


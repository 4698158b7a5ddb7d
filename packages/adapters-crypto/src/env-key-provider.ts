/**
 * The `env` key provider: private keys injected as PEM in environment variables, for platforms
 * that hand secrets to a process that way. Nothing is written to disk. The keys are read once
 * at start; a rotation is a new environment value and a restart, and the public half of the
 * replaced key stays published through the published-keys store (ServiceSigningKeys).
 */
import type { SigningProviderKind } from '@ets/domain';
import { HybridKeyMissingError, KeyRingError } from './errors.js';
import { ed25519KeyId, mlDsa65KeyId } from './jwk.js';
import type { ActiveKeyIds, ActiveSigningKeys, KeyProvider, ProviderKey, RotationOutcome, SigningMode } from './key-provider.js';
import { generateEd25519, generateMlDsa65, localSigningKeys, parseEd25519Pem, parseMlDsa65Pem } from './local-keys.js';
import type { MlDsa65PrivateKey } from './ml-dsa65.js';

export const ENV_KEY_VARIABLES = { ed25519: 'SVC_SIGNING_KEY_PEM', mlDsa65: 'SVC_SIGNING_PQ_KEY_PEM' } as const;

export interface EnvKeyProviderOptions {
  mode: SigningMode;
  /** Ed25519 PKCS#8 PEM (the value of SVC_SIGNING_KEY_PEM). */
  ed25519Pem: string | undefined;
  /** ML-DSA-65 seed-form PKCS#8 PEM (SVC_SIGNING_PQ_KEY_PEM), required in hybrid mode. */
  mlDsa65Pem?: string | undefined;
}

export class EnvKeyProvider implements KeyProvider {
  readonly kind: SigningProviderKind = 'env';
  readonly location: string;
  readonly #mode: SigningMode;
  readonly #signing: ActiveSigningKeys;
  readonly #keys: readonly ProviderKey[];

  private constructor(mode: SigningMode, signing: ActiveSigningKeys, keys: readonly ProviderKey[]) {
    this.#mode = mode;
    this.#signing = signing;
    this.#keys = keys;
    this.location = mode === 'hybrid' ? `${ENV_KEY_VARIABLES.ed25519} and ${ENV_KEY_VARIABLES.mlDsa65}` : ENV_KEY_VARIABLES.ed25519;
  }

  /** Error messages name the variable, never its value. */
  static async open(options: EnvKeyProviderOptions): Promise<EnvKeyProvider> {
    const { ed25519: edName, mlDsa65: pqName } = ENV_KEY_VARIABLES;
    if (!options.ed25519Pem) {
      throw new KeyRingError(`SVC_SIGNING_PROVIDER=env needs ${edName} (an Ed25519 private key, PKCS#8 PEM; 'ets signing-keys rotate' makes one)`);
    }
    if (options.mode === 'hybrid' && !options.mlDsa65Pem) {
      throw new HybridKeyMissingError(`refusing to start in hybrid signing mode: ${pqName} (the ML-DSA-65 private key) is not set`, []);
    }
    const ed = parseEd25519Pem(unescapeNewlines(options.ed25519Pem));
    if (!ed) throw new KeyRingError(`${edName} is not an Ed25519 private key (PKCS#8 PEM)`);
    const keyId = await ed25519KeyId(ed.publicKey);
    const keys: ProviderKey[] = [{ keyId, alg: 'Ed25519', active: true, publicKey: ed.publicKey }];

    let pq: { keyId: string; key: MlDsa65PrivateKey } | undefined;
    if (options.mode === 'hybrid' && options.mlDsa65Pem) {
      const parsed = parseMlDsa65Pem(unescapeNewlines(options.mlDsa65Pem));
      if (!parsed) throw new KeyRingError(`${pqName} is not a seed-form ML-DSA-65 private key (PKCS#8 PEM)`);
      pq = { keyId: await mlDsa65KeyId(parsed.publicKey), key: parsed.key };
      keys.push({ keyId: pq.keyId, alg: 'ML-DSA-65', active: true, publicKey: parsed.publicKey });
    }
    return new EnvKeyProvider(options.mode, localSigningKeys(keyId, ed.key, pq), Object.freeze(keys));
  }

  get mode(): SigningMode {
    return this.#mode;
  }

  get activeKeyIds(): ActiveKeyIds {
    const { keyId, pqKeyId } = this.#signing;
    return pqKeyId === undefined ? { keyId } : { keyId, pqKeyId };
  }

  signingKeys(): ActiveSigningKeys {
    return this.#signing;
  }

  /** The injected keys only: keys of earlier values are remembered by the published-keys store. */
  keys(): readonly ProviderKey[] {
    return this.#keys;
  }

  async refresh(): Promise<void> {}

  /**
   * New private keys for the operator to install as the new environment values. This process
   * keeps signing with the injected keys until it is restarted with the new ones.
   */
  rotate(): Promise<RotationOutcome> {
    return EnvKeyProvider.generate(this.#mode);
  }

  /** Fresh keys for the environment, as a first setup or a rotation hands them to the operator. */
  static async generate(mode: SigningMode): Promise<Extract<RotationOutcome, { kind: 'handOver' }>> {
    const ed = await generateEd25519();
    const environment: Record<string, string> = { [ENV_KEY_VARIABLES.ed25519]: ed.pem };
    const active: ActiveKeyIds = { keyId: ed.keyId };
    if (mode === 'hybrid') {
      const pq = await generateMlDsa65();
      environment[ENV_KEY_VARIABLES.mlDsa65] = pq.pem;
      active.pqKeyId = pq.keyId;
    }
    return { kind: 'handOver', active, environment };
  }

  async close(): Promise<void> {}
}

/** Platforms that cannot hold a multi-line value often pass a PEM with literal `\n` sequences. */
function unescapeNewlines(pem: string): string {
  return pem.includes('\n') ? pem : pem.replace(/\\n/g, '\n');
}

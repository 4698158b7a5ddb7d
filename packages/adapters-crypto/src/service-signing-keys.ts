/**
 * The service's signing keys as the rest of the service sees them, whatever the provider: the
 * snapshot to sign with, and the published key set (JWKS) that verifies everything the service
 * ever signed.
 *
 * The JWKS is the provider's keys plus every key remembered in the published-keys store. Every
 * key the provider holds is remembered before the service signs anything with it, so a key that
 * leaves its provider (a replaced environment value, a key removed from a module, a switch from
 * disk to a module) stays published. Both sources are read again at most every five minutes
 * (spec 8, the public key cache): a rotation by another process, or a key another instance
 * published, appears within that time without a restart.
 */
import type { Logger, PublishedKeyStore, PublishedSigningKey, SigningKeyCustody, SigningProviderKind } from '@ets/domain';
import { frozenJwks, keyIdOf, type PublicJwk, type PublicJwkSet } from './jwk.js';
import type { ActiveKeyIds, ActiveSigningKeys, KeyInfo, KeyProvider, ProviderKey, SigningMode } from './key-provider.js';
import type { SigningKeySource } from './record-signer.js';

export const PUBLIC_KEY_CACHE_MS = 5 * 60_000;

export interface ServiceSigningKeysOptions {
  /** Where published keys are remembered; without it the JWKS holds the provider's keys only. */
  store?: PublishedKeyStore;
  /** Milliseconds since the epoch (tests move it forward). */
  now?: () => number;
  cacheMs?: number;
  logger?: Logger;
}

/** A published key as listed for operators: where it is held now, if anywhere. */
export interface PublishedKeyInfo extends KeyInfo {
  /** `provider`: the active provider holds it; `published`: only its public half remains. */
  heldBy: 'provider' | 'published';
}

export class ServiceSigningKeys implements SigningKeySource, SigningKeyCustody {
  readonly #provider: KeyProvider;
  readonly #store: PublishedKeyStore | undefined;
  readonly #now: () => number;
  readonly #cacheMs: number;
  readonly #logger: Logger | undefined;
  #stored: readonly PublishedSigningKey[] = [];
  #jwks: PublicJwkSet = frozenJwks([]);
  #byKid = new Map<string, PublicJwk>();
  #readAt = 0;
  #refreshing: Promise<void> | undefined;

  private constructor(provider: KeyProvider, options: ServiceSigningKeysOptions) {
    this.#provider = provider;
    this.#store = options.store;
    this.#now = options.now ?? Date.now;
    this.#cacheMs = options.cacheMs ?? PUBLIC_KEY_CACHE_MS;
    this.#logger = options.logger;
  }

  /** Remembers the provider's keys (before anything is signed with them) and reads the store. */
  static async open(provider: KeyProvider, options: ServiceSigningKeysOptions = {}): Promise<ServiceSigningKeys> {
    const keys = new ServiceSigningKeys(provider, options);
    await keys.#publish();
    return keys;
  }

  /** Which provider holds the signing keys (profile A's `/health` `signing_mode`). */
  get provider(): SigningProviderKind {
    return this.#provider.kind;
  }

  get mode(): SigningMode {
    return this.#provider.mode;
  }

  /** Where the provider keeps its keys, for operator messages. */
  get location(): string {
    return this.#provider.location;
  }

  get activeKeyIds(): ActiveKeyIds {
    return this.#provider.activeKeyIds;
  }

  signingKeys(): ActiveSigningKeys {
    return this.#provider.signingKeys();
  }

  /** Every key that signed anything. The object is frozen and replaced when the set changes. */
  jwks(): PublicJwkSet {
    this.#refreshIfStale();
    return this.#jwks;
  }

  publicKey(kid: string): PublicJwk | undefined {
    this.#refreshIfStale();
    return this.#byKid.get(kid);
  }

  keys(): PublishedKeyInfo[] {
    const held = this.#provider.keys();
    const heldIds = new Set(held.map((k) => k.keyId));
    const firstPublished = new Map(this.#stored.map((k) => [k.keyId, k.publishedAt]));
    return [
      ...held.map(({ keyId, alg, createdAt, active }) => ({ keyId, alg, createdAt: createdAt ?? firstPublished.get(keyId), active, heldBy: 'provider' as const })),
      ...this.#stored
        .filter((k) => !heldIds.has(k.keyId))
        .map(({ keyId, alg, publishedAt }) => ({ keyId, alg, createdAt: publishedAt, active: false, heldBy: 'published' as const })),
    ];
  }

  /** Reads the provider's keys and the store again now, instead of when the cache expires. */
  refresh(): Promise<void> {
    this.#refreshing ??= (async () => {
      try {
        await this.#provider.refresh();
        await this.#publish();
      } finally {
        this.#refreshing = undefined;
      }
    })();
    return this.#refreshing;
  }

  close(): Promise<void> {
    return this.#provider.close();
  }

  #refreshIfStale(): void {
    if (this.#refreshing || this.#now() - this.#readAt < this.#cacheMs) return;
    // Serve the current set meanwhile: a JWKS request never waits for the module or the database.
    this.refresh().catch((e: unknown) => {
      this.#logger?.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not read the published signing keys again; serving the cached set');
    });
  }

  async #publish(): Promise<void> {
    const held = this.#provider.keys();
    if (this.#store) {
      const publishedAt = new Date(this.#now()).toISOString();
      await this.#store.remember(held.map((k) => ({ keyId: k.keyId, alg: k.alg, publicKey: k.publicKey, provider: this.#provider.kind, publishedAt })));
      this.#stored = await this.#checked(await this.#store.list());
    }
    this.#readAt = this.#now();
    const heldIds = new Set(held.map((k) => k.keyId));
    const all: Array<Pick<ProviderKey, 'keyId' | 'alg' | 'publicKey'>> = [...held, ...this.#stored.filter((k) => !heldIds.has(k.keyId))];
    if (all.map((k) => k.keyId).join(' ') === this.#jwks.keys.map((k) => k.kid).join(' ')) return;
    this.#jwks = frozenJwks(all);
    this.#byKid = new Map(this.#jwks.keys.map((k) => [k.kid, k]));
  }

  /** A stored key whose keyId does not derive from its public key is damaged data: never published. */
  async #checked(stored: readonly PublishedSigningKey[]): Promise<PublishedSigningKey[]> {
    const valid: PublishedSigningKey[] = [];
    for (const key of stored) {
      if ((await keyIdOf(key).catch(() => undefined)) === key.keyId) valid.push(key);
      else this.#logger?.warn({ keyId: key.keyId }, 'a stored published signing key does not match its keyId; not publishing it');
    }
    return valid;
  }
}

/**
 * Remembers the `jti` of every release accepted until it expires, so a release is acted on at
 * most once. An endpoint served by several processes passes a shared store (a database table with
 * a unique key, Redis SET NX with an expiry, …) implementing the same method.
 */
export interface JtiStore {
  /** True the first time `jti` is seen; false ever after, until `expiresAt` (seconds) has passed. */
  consume(jti: string, expiresAt: number): Promise<boolean>;
}

/** In one process's memory; forgets a jti once its release has expired (it is refused as expired anyway). */
export class MemoryJtiStore implements JtiStore {
  readonly #seen = new Map<string, number>();

  constructor(private readonly now: () => Date = () => new Date()) {}

  async consume(jti: string, expiresAt: number): Promise<boolean> {
    const nowSec = this.now().getTime() / 1000;
    for (const [id, exp] of this.#seen) if (exp < nowSec) this.#seen.delete(id);
    if (this.#seen.has(jti)) return false;
    this.#seen.set(jti, expiresAt);
    return true;
  }
}

/**
 * PKCS#11 sessions run one operation at a time, and opening one costs a round trip to the module.
 * The pool opens sessions as concurrent signers need them, up to `size`, and hands them back
 * out: a session per concurrent signer, not per signature. A session whose operation failed is
 * closed instead of reused, so a half-finished operation never leaks into the next signature.
 */
import type { Handle } from './module.js';

interface Waiter {
  resolve(session: Handle): void;
  reject(error: unknown): void;
}

export class SessionPool {
  readonly #idle: Handle[] = [];
  readonly #waiters: Waiter[] = [];
  #open = 0;
  #closed = false;

  constructor(
    private readonly openSession: () => Handle,
    private readonly closeSession: (session: Handle) => void,
    readonly size: number,
    /** Told of every failed operation before its session is closed. */
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError('session pool size must be a whole number of at least 1');
  }

  /** Sessions open now (idle or in use). */
  get openSessions(): number {
    return this.#open;
  }

  async use<T>(operation: (session: Handle) => T | Promise<T>): Promise<T> {
    const session = await this.#acquire();
    let failed = false;
    try {
      return await operation(session);
    } catch (e) {
      failed = true;
      this.onError(e);
      throw e;
    } finally {
      if (failed || this.#closed) this.#discard(session);
      else this.#release(session);
    }
  }

  /** Closes idle sessions now and busy ones when their operation ends. */
  close(): void {
    this.#closed = true;
    for (const session of this.#idle.splice(0)) this.#discard(session);
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new Error('the PKCS#11 session pool is closed'));
  }

  #acquire(): Promise<Handle> {
    if (this.#closed) return Promise.reject(new Error('the PKCS#11 session pool is closed'));
    const idle = this.#idle.pop();
    if (idle) return Promise.resolve(idle);
    if (this.#open < this.size) {
      try {
        return Promise.resolve(this.#openOne());
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  #release(session: Handle): void {
    const waiter = this.#waiters.shift();
    if (waiter) waiter.resolve(session);
    else this.#idle.push(session);
  }

  #discard(session: Handle): void {
    this.#open -= 1;
    try {
      this.closeSession(session);
    } catch {
      // The session is already unusable (that is why it is discarded); closing it is best effort.
    }
    const waiter = this.#closed ? undefined : this.#waiters.shift();
    if (!waiter) return;
    try {
      waiter.resolve(this.#openOne());
    } catch (e) {
      waiter.reject(e);
    }
  }

  #openOne(): Handle {
    const session = this.openSession();
    this.#open += 1;
    return session;
  }
}

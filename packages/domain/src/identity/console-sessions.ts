/**
 * Sessions of the approvers' console (CONTRACT "Approvers' console and impact preview"). A person
 * signs in once with their USER key; the browser then holds only a random session id in an
 * HttpOnly cookie, never the key. The session authenticates as the key it was made with, for as
 * long as that key exists and the session is used at least every IDLE_SECONDS (and at most
 * MAX_SECONDS in all).
 *
 * Only a hash of the session id is stored, so a copy of the database signs nobody in. The CSRF
 * token is derived from the session id (a hash of it under its own label): the server recomputes
 * it from the cookie of each request, stores nothing for it, and a page can get it again after a
 * reload (GET /console/session), while another site, which never sees the cookie, cannot.
 */
import type { Caller } from './caller.js';
import { isVerifiedHuman } from './caller.js';
import type { Clock } from '../ports/clock.js';
import type { Hasher } from '../ports/crypto.js';
import type { NonceGenerator } from '../ports/single-use.js';
import { DomainError } from '../shared/errors.js';

/** Idle expiry: a session unused for 30 minutes ends (CONTRACT). */
export const CONSOLE_SESSION_IDLE_SECONDS = 30 * 60;
/** However busy, a session ends 12 hours after sign-in: a working day, then the key again. */
export const CONSOLE_SESSION_MAX_SECONDS = 12 * 60 * 60;
/**
 * A request extends the idle expiry only when it is at least this old, so a busy page writes to the
 * store about once a minute, not on every request; the expiry is at most this much early.
 */
export const CONSOLE_SESSION_EXTEND_AFTER_SECONDS = 60;

/** A stored session: no session id, no key, no token. */
export interface ConsoleSessionRow {
  /** Lower-case hex SHA-256 of the session id. */
  idHash: string;
  callerId: string;
  /** Which key signed in (CallerDirectory.keyRefOf): the session ends when that key is removed. */
  keyRef: string;
  createdAt: string;
  /** Idle expiry, moved forward as the session is used. */
  expiresAt: string;
  /** The latest the idle expiry may reach (createdAt + MAX_SECONDS). */
  endsAt: string;
}

/** Where sessions live: the service's database, so that every instance behind a load balancer knows them. */
export interface ConsoleSessionStore {
  create(row: ConsoleSessionRow): Promise<void>;
  find(idHash: string): Promise<ConsoleSessionRow | undefined>;
  /** Moves the idle expiry forward (never back). */
  extend(idHash: string, expiresAt: string): Promise<void>;
  remove(idHash: string): Promise<void>;
  /** Removes every session whose idle expiry is at or before `now`; how many. */
  removeExpired(now: string): Promise<number>;
}

/** The keys that may hold a session: a key's reference, and the caller of a reference while the key exists. */
export interface SessionKeys {
  keyRefOf(rawKey: string): string | undefined;
  callerOfKeyRef(keyRef: string): Caller | undefined;
}

export interface ConsoleSessionDeps {
  store: ConsoleSessionStore;
  keys: SessionKeys;
  hasher: Pick<Hasher, 'sha256Hex'>;
  clock: Clock;
  /** The session ids: 32 random bytes, base64url. */
  nonces: NonceGenerator;
}

export interface OpenedSession {
  /** The cookie's value: shown to the browser once, never stored. */
  sessionId: string;
  callerId: string;
  csrfToken: string;
  expiresAt: string;
}

export interface ResolvedSession {
  caller: Caller;
  csrfToken: string;
  expiresAt: string;
}

/** A session id as the cookie carries it; anything else is not looked up. */
const SESSION_ID = /^[A-Za-z0-9_-]{22,128}$/;

const plus = (at: Date, seconds: number): string => new Date(at.getTime() + seconds * 1000).toISOString();
const earlier = (a: string, b: string): string => (a <= b ? a : b);

export class ConsoleSessions {
  constructor(private readonly d: ConsoleSessionDeps) {}

  /**
   * Opens a session for the key `caller` authenticated with. Only a verified human (a USER key)
   * may hold one: the console is where people decide. Expired sessions are cleared on the way.
   */
  async signIn(caller: Caller, rawKey: string): Promise<OpenedSession> {
    if (!isVerifiedHuman(caller)) {
      throw new DomainError('forbidden', 'Only a verified human (a USER key) may sign in to the console.', 'NON_HUMAN_CALLER_DENIED');
    }
    const keyRef = this.d.keys.keyRefOf(rawKey);
    if (keyRef === undefined) throw new DomainError('unauthenticated', 'authentication required');
    const now = this.d.clock.now();
    await this.d.store.removeExpired(now.toISOString());
    const sessionId = this.d.nonces.nonce();
    const endsAt = plus(now, CONSOLE_SESSION_MAX_SECONDS);
    const expiresAt = earlier(plus(now, CONSOLE_SESSION_IDLE_SECONDS), endsAt);
    await this.d.store.create({ idHash: this.idHash(sessionId), callerId: caller.callerId, keyRef, createdAt: now.toISOString(), expiresAt, endsAt });
    return { sessionId, callerId: caller.callerId, csrfToken: this.csrfTokenOf(sessionId), expiresAt };
  }

  /**
   * The caller of a live session, its CSRF token and its (extended) idle expiry; undefined for an
   * unknown, expired or ended session, or one whose key is gone (an expired one is removed).
   */
  async resolve(sessionId: string): Promise<ResolvedSession | undefined> {
    if (!SESSION_ID.test(sessionId)) return undefined;
    const idHash = this.idHash(sessionId);
    const row = await this.d.store.find(idHash);
    if (!row) return undefined;
    const now = this.d.clock.now();
    const caller = this.d.keys.callerOfKeyRef(row.keyRef);
    if (row.expiresAt <= now.toISOString() || !caller || caller.callerId !== row.callerId || !isVerifiedHuman(caller)) {
      await this.d.store.remove(idHash);
      return undefined;
    }
    let expiresAt = row.expiresAt;
    const next = earlier(plus(now, CONSOLE_SESSION_IDLE_SECONDS), row.endsAt);
    if (next > plus(new Date(Date.parse(row.expiresAt)), CONSOLE_SESSION_EXTEND_AFTER_SECONDS)) {
      await this.d.store.extend(idHash, next);
      expiresAt = next;
    }
    return { caller, csrfToken: this.csrfTokenOf(sessionId), expiresAt };
  }

  /** Ends a session at once (sign-out): its cookie stops working on every instance. */
  async signOut(sessionId: string): Promise<void> {
    if (SESSION_ID.test(sessionId)) await this.d.store.remove(this.idHash(sessionId));
  }

  /** The CSRF token of a session: a hash of its id under its own label, so neither gives the other. */
  csrfTokenOf(sessionId: string): string {
    return this.d.hasher.sha256Hex(`ets-console-csrf:${sessionId}`);
  }

  private idHash(sessionId: string): string {
    return this.d.hasher.sha256Hex(`ets-console-session:${sessionId}`);
  }
}

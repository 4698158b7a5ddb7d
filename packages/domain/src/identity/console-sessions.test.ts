import { describe, expect, it } from '@jest/globals';
import type { Caller, CredentialHolderType } from './caller.js';
import {
  CONSOLE_SESSION_EXTEND_AFTER_SECONDS,
  CONSOLE_SESSION_IDLE_SECONDS,
  CONSOLE_SESSION_MAX_SECONDS,
  ConsoleSessions,
  type ConsoleSessionRow,
  type ConsoleSessionStore,
} from './console-sessions.js';

class MemoryStore implements ConsoleSessionStore {
  rows = new Map<string, ConsoleSessionRow>();
  writes = 0;
  async create(row: ConsoleSessionRow) {
    this.writes++;
    this.rows.set(row.idHash, { ...row });
  }
  async find(idHash: string) {
    const r = this.rows.get(idHash);
    return r && { ...r };
  }
  async extend(idHash: string, expiresAt: string) {
    this.writes++;
    const r = this.rows.get(idHash);
    if (r && r.expiresAt < expiresAt) r.expiresAt = expiresAt;
  }
  async remove(idHash: string) {
    this.rows.delete(idHash);
  }
  async removeExpired(now: string) {
    let n = 0;
    for (const [k, r] of this.rows) if (r.expiresAt <= now && this.rows.delete(k)) n++;
    return n;
  }
}

const human: Caller = { callerId: 'alice', credentialHolderType: 'USER', allowedCapabilities: [], allowedPrincipalIds: [], allowedTenantIds: [] };

function setup() {
  const store = new MemoryStore();
  let now = Date.parse('2026-03-01T09:00:00.000Z');
  let n = 0;
  const keys = new Map([['ref-of-key-a', human]]);
  const sessions = new ConsoleSessions({
    store,
    keys: { keyRefOf: (raw) => (raw === 'key-a' ? 'ref-of-key-a' : undefined), callerOfKeyRef: (ref) => keys.get(ref) },
    hasher: { sha256Hex: (t) => `sha256(${t})` },
    clock: { now: () => new Date(now) },
    nonces: { nonce: () => `session-id-${++n}-${'x'.repeat(20)}` },
  });
  return { store, sessions, keys, advance: (s: number) => (now += s * 1000) };
}

describe('console sessions', () => {
  it('opens a session for a USER key, storing a hash of its id only; the CSRF token is another hash of it', async () => {
    const { store, sessions } = setup();
    const opened = await sessions.signIn(human, 'key-a');
    expect(opened).toEqual({ sessionId: expect.any(String), callerId: 'alice', csrfToken: `sha256(ets-console-csrf:${opened.sessionId})`, expiresAt: '2026-03-01T09:30:00.000Z' });
    const [row] = [...store.rows.values()];
    expect(row).toEqual({ idHash: `sha256(ets-console-session:${opened.sessionId})`, callerId: 'alice', keyRef: 'ref-of-key-a', createdAt: '2026-03-01T09:00:00.000Z', expiresAt: opened.expiresAt, endsAt: '2026-03-01T21:00:00.000Z' });
    expect(await sessions.resolve(opened.sessionId)).toEqual({ caller: human, csrfToken: opened.csrfToken, expiresAt: opened.expiresAt });
  });

  it.each<[CredentialHolderType | undefined]>([['SERVICE'], ['ROLE'], ['ORGANIZATION'], [undefined]])('refuses holder type %s with NON_HUMAN_CALLER_DENIED', async (holder) => {
    const { sessions, store } = setup();
    await expect(sessions.signIn({ ...human, credentialHolderType: holder }, 'key-a')).rejects.toMatchObject({ kind: 'forbidden', code: 'NON_HUMAN_CALLER_DENIED' });
    expect(store.rows.size).toBe(0);
  });

  it('ends after 30 idle minutes; use moves the expiry forward, writing at most once a minute; 12 hours is the most', async () => {
    const { sessions, store, advance } = setup();
    const { sessionId } = await sessions.signIn(human, 'key-a');
    const writes = store.writes;
    advance(CONSOLE_SESSION_EXTEND_AFTER_SECONDS - 1);
    expect((await sessions.resolve(sessionId))?.expiresAt).toBe('2026-03-01T09:30:00.000Z');
    expect(store.writes).toBe(writes);
    advance(2);
    expect((await sessions.resolve(sessionId))?.expiresAt).toBe('2026-03-01T09:31:01.000Z');
    expect(store.writes).toBe(writes + 1);
    // Used every 20 minutes, it still ends 12 hours after sign-in.
    let last: string | undefined;
    for (let t = 20 * 60; t < CONSOLE_SESSION_MAX_SECONDS; t += 20 * 60) {
      advance(20 * 60);
      last = (await sessions.resolve(sessionId))?.expiresAt ?? last;
    }
    expect(last).toBe('2026-03-01T21:00:00.000Z');
    advance(CONSOLE_SESSION_IDLE_SECONDS);
    expect(await sessions.resolve(sessionId)).toBeUndefined();
    expect(store.rows.size).toBe(0);
  });

  it('an idle session is refused and removed; sign-in clears expired ones', async () => {
    const { sessions, store, advance } = setup();
    const a = await sessions.signIn(human, 'key-a');
    advance(CONSOLE_SESSION_IDLE_SECONDS);
    expect(await sessions.resolve(a.sessionId)).toBeUndefined();
    const b = await sessions.signIn(human, 'key-a');
    advance(CONSOLE_SESSION_IDLE_SECONDS);
    await sessions.signIn(human, 'key-a');
    expect(store.rows.size).toBe(1);
    expect(await sessions.resolve(b.sessionId)).toBeUndefined();
  });

  it('ends when its key is removed, at sign-out, and never resolves a malformed id', async () => {
    const { sessions, keys } = setup();
    const a = await sessions.signIn(human, 'key-a');
    const b = await sessions.signIn(human, 'key-a');
    await sessions.signOut(a.sessionId);
    expect(await sessions.resolve(a.sessionId)).toBeUndefined();
    expect(await sessions.resolve(b.sessionId)).toBeDefined();
    keys.clear();
    expect(await sessions.resolve(b.sessionId)).toBeUndefined();
    for (const bad of ['', 'short', 'x'.repeat(129), 'has space in it 0123456789']) expect(await sessions.resolve(bad)).toBeUndefined();
    await expect(sessions.signIn(human, 'unknown-key')).rejects.toMatchObject({ kind: 'unauthenticated' });
  });
});

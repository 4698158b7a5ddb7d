import { describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { runCli, spawnServer, tempDirs } from '@ets/test-support';

const tmp = tempDirs('ets-cli-');

describe('ets serve', () => {
  it('serves, logs JSON lines, and stops gracefully on SIGTERM and SIGINT', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const server = await spawnServer({ SVC_DATA_DIR: tmp() });
      expect((await request(server.url).get('/health')).body).toEqual({ status: 'UP' });
      expect(await server.stop(signal)).toBe(0);
      // JSON log lines; the first-start key notice is plain text on stderr.
      const lines = server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string });
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['storage ready', 'listening', 'shutting down', 'stopped']));
    }
  });

  it('warns at start when caller authentication is disabled', async () => {
    const server = await spawnServer({ SVC_DATA_DIR: tmp(), SVC_AUTH_DISABLED: 'true' });
    try {
      const warning = server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string }).find((l) => /authentication is DISABLED/.test(l.msg));
      expect(warning?.level).toBe(40);
      expect((await request(server.url).get('/callers/me')).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it.each([
    ['SVC_PORT', 'abc', /SVC_PORT.*whole numbers from 0 to 65535/],
    ['SVC_SIGNING_MODE', 'rsa', /SVC_SIGNING_MODE.*ed25519, hybrid/],
    ['SVC_AUTH_DISABLED', 'yes', /SVC_AUTH_DISABLED.*true, false/],
    ['SVC_PROFILE', 'x', /SVC_PROFILE.*transaction, attestation, attestation-simple/],
    ['SVC_DATABASE_URL', 'mysql://u:secret@h/db', /SVC_DATABASE_URL.*postgres:\/\//],
    ['RATE_LIMIT_EXECUTE_PER_MINUTE', '-1', /RATE_LIMIT_EXECUTE_PER_MINUTE/],
    ['SVC_GRANT_MAX_DAYS', '0', /SVC_GRANT_MAX_DAYS.*whole numbers from 1 to 3660/],
  ])('refuses to start with a bad %s in one clear line', async (name, value, message) => {
    const r = await runCli(['serve'], { SVC_DATA_DIR: tmp(), [name]: value });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stderr).not.toContain('secret');
  });
});

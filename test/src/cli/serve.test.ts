import { describe, expect, it } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
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
    ['SVC_NOTIFY_WEBHOOK_URLS', 'http://hooks.example.com/secret', /SVC_NOTIFY_WEBHOOK_URLS: entry 1 must use https/],
    ['SVC_NOTIFY_WEBHOOK_SECRET', 'whsec_secret', /SVC_NOTIFY_WEBHOOK_SECRET: it needs SVC_NOTIFY_WEBHOOK_URLS/],
    ['SVC_PUBLIC_URL', 'ets.example.com', /SVC_PUBLIC_URL.*http:\/\/ or https:\/\//],
    ['SVC_MCP_STDIO_SERVERS', '/nonexistent/stdio-servers.json', /SVC_MCP_STDIO_SERVERS.*cannot read it \(ENOENT\)/],
    ['SVC_MCP_ALLOWED_ORIGINS', 'evil.example.com', /SVC_MCP_ALLOWED_ORIGINS.*is not an origin/],
  ])('refuses to start with a bad %s in one clear line', async (name, value, message) => {
    const r = await runCli(['serve'], { SVC_DATA_DIR: tmp(), [name]: value });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stderr).not.toContain('secret');
  });
});

describe('ets serve with SVC_MCP_STDIO_SERVERS', () => {
  it('refuses a stdio servers file that is not as the contract says, in one line that never shows an env value (exit 2)', async () => {
    const dir = tmp();
    const file = path.join(dir, 'stdio.json');
    writeFileSync(file, JSON.stringify({ files: { command: 'npx', env: { API_TOKEN: 'secret-token', PORT: 8080 } } }));
    const r = await runCli(['serve'], { SVC_DATA_DIR: tmp(), SVC_MCP_STDIO_SERVERS: file });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/SVC_MCP_STDIO_SERVERS.*server 'files': env PORT must be a string/);
    expect(r.stderr).not.toContain('secret');
  });
});

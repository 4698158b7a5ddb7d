import { afterAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import request from 'supertest';
import { createDataSource, type StorageTarget } from '@ets/adapters-persistence';
import { runCli, spawnServer, STORAGE_TARGETS, tempDirs } from '@ets/test-support';

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

/** Every file under `dir` with the SHA-256 of its bytes (the SQLite file, its WAL, keys, key file). */
const filesOf = (dir: string): Record<string, string> =>
  Object.fromEntries(
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => {
        const file = path.join(e.parentPath, e.name);
        return [path.relative(dir, file), createHash('sha256').update(readFileSync(file)).digest('hex')];
      }),
  );

/** What a start writes: the transparency log's size, its leaves, runtime manifests, audit events, migrations. */
async function writtenRows(target: StorageTarget): Promise<Record<string, number>> {
  const ds = createDataSource(target, target.kind === 'sqlite' ? { readOnly: true } : {});
  await ds.initialize();
  try {
    const one = async (sql: string) => Number(((await ds.query(sql)) as { n: string | number }[])[0]!.n);
    return {
      treeSize: await one('SELECT tree_size AS n FROM transparency_log_head WHERE id = 1'),
      leaves: await one('SELECT COUNT(*) AS n FROM transparency_log_leaves'),
      manifests: await one('SELECT COUNT(*) AS n FROM runtime_manifests'),
      auditEvents: await one('SELECT COUNT(*) AS n FROM audit_events'),
      migrations: await one('SELECT COUNT(*) AS n FROM migrations'),
      publishedKeys: await one('SELECT COUNT(*) AS n FROM published_signing_keys'),
    };
  } finally {
    await ds.destroy();
  }
}

describe.each(STORAGE_TARGETS)('a start that cannot listen, on $name', (factory) => {
  const blockers: Server[] = [];
  afterAll(() => {
    for (const b of blockers) b.close();
  });

  it('writes nothing when the running instance holds the port: no migration, no manifest, no leaf, no key', async () => {
    const db = await factory.provision();
    const dataDir = tmp();
    const env = { SVC_DATA_DIR: dataDir, ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}) };
    const target: StorageTarget = db.target.kind === 'postgres' ? db.target : { kind: 'sqlite', file: path.join(dataDir, 'ets.sqlite') };
    const running = await spawnServer(env, 120_000);
    try {
      const port = new URL(running.url).port;
      // Let the running instance settle (its first checkpoint), then take what it has written.
      await new Promise((r) => setTimeout(r, 2500));
      const before = await writtenRows(target);
      const files = filesOf(dataDir);
      expect(before.manifests).toBe(1);

      const second = await runCli(['serve'], { ...env, SVC_HOST: '127.0.0.1', SVC_PORT: port });
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(/cannot listen on 127\.0\.0\.1:\d+: the address is already in use/);
      expect(second.stdout + second.stderr).not.toMatch(/"msg":"(storage ready|runtime manifest signed)"/);
      expect(await writtenRows(target)).toEqual(before);
      if (db.target.kind === 'postgres') expect(filesOf(dataDir)).toEqual(files);
    } finally {
      await running.stop();
      await db.drop();
    }
  });

  it('on a fresh data dir and database, leaves both as they were: no signing key, no key file, no table', async () => {
    const db = await factory.provision();
    const dataDir = path.join(tmp(), 'data');
    const blocker = createServer();
    blockers.push(blocker);
    const port = await new Promise<number>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve((blocker.address() as { port: number }).port)));
    try {
      const env = { SVC_DATA_DIR: dataDir, SVC_HOST: '127.0.0.1', SVC_PORT: String(port), ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}) };
      const r = await runCli(['serve'], env);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/already in use/);
      expect(existsSync(dataDir)).toBe(false);
      if (db.target.kind === 'postgres') {
        const ds = createDataSource(db.target);
        await ds.initialize();
        try {
          expect(await ds.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")).toEqual([]);
        } finally {
          await ds.destroy();
        }
      }
    } finally {
      await db.drop();
    }
  });
});

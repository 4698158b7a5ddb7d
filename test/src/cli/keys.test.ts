import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { runCli, spawnServer, tempDirs } from '@ets/test-support';

const tmp = tempDirs('ets-keys-');

/** Every byte of every file under dir, as text. */
const allFileText = (dir: string): string =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => readFileSync(path.join(e.parentPath, e.name), 'latin1'))
    .join('\n');

describe('ets keys', () => {
  it('issues one USER key on a first start, prints it once, and stores only its hash', async () => {
    const dataDir = tmp();
    const server = await spawnServer({ SVC_DATA_DIR: dataDir });
    try {
      const raw = /(pk_local_[A-Za-z0-9_-]{20,})/.exec(server.output())?.[1];
      expect(raw).toBeDefined();
      const me = await request(server.url).get('/callers/me').set('authorization', `Bearer ${raw}`);
      expect(me.status).toBe(200);
      expect(me.body.credentialHolderType).toBe('USER');
      expect(allFileText(dataDir)).not.toContain(raw!);
      expect(statSync(path.join(dataDir, 'api-keys.json')).mode & 0o777).toBe(0o600);
      // The raw key never reaches the JSON log lines.
      const logLines = server.output().split('\n').filter((l) => l.startsWith('{'));
      expect(logLines.join('\n')).not.toContain(raw!);
    } finally {
      await server.stop();
    }
    const again = await spawnServer({ SVC_DATA_DIR: dataDir });
    expect(again.output()).not.toMatch(/pk_local_/);
    await again.stop();
  });

  it('adds keys (raw key alone on stdout), lists without keys or hashes, rotates with --keep-newest', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    const first = await runCli(['keys', 'add', '--caller-id', 'svc', '--holder', 'SERVICE', '--capabilities', 'sandbox:echo,payments:transfer', '--tenant-ids', 't1'], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^pk_local_[A-Za-z0-9_-]+\n$/);
    const oldKey = first.stdout.trim();
    const second = await runCli(['keys', 'add', '--caller-id', 'svc', '--holder', 'SERVICE'], env);
    const newKey = second.stdout.trim();
    await runCli(['keys', 'add', '--caller-id', 'admin', '--holder', 'USER', '--capabilities', '*'], env);

    const listed = await runCli(['keys', 'list'], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain('svc');
    expect(listed.stdout).toContain('sandbox:echo,payments:transfer');
    const file = JSON.parse(readFileSync(path.join(env.SVC_DATA_DIR, 'api-keys.json'), 'utf8')) as { keys: { keyHash: string }[] };
    for (const k of file.keys) expect(listed.stdout).not.toContain(k.keyHash);
    expect(listed.stdout).not.toContain('pk_local_');
    expect(allFileText(env.SVC_DATA_DIR)).not.toContain(oldKey);
    expect(allFileText(env.SVC_DATA_DIR)).not.toContain(newKey);

    let server = await spawnServer(env);
    expect((await request(server.url).get('/callers/me').set('authorization', `Bearer ${oldKey}`)).status).toBe(200);
    expect((await request(server.url).get('/callers/me').set('authorization', `Bearer ${newKey}`)).status).toBe(200);
    await server.stop();

    const removed = await runCli(['keys', 'remove', '--caller-id', 'svc', '--keep-newest'], env);
    expect(removed.code).toBe(0);
    server = await spawnServer(env);
    try {
      expect((await request(server.url).get('/callers/me').set('authorization', `Bearer ${oldKey}`)).status).toBe(401);
      expect((await request(server.url).get('/callers/me').set('authorization', `Bearer ${newKey}`)).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it('refuses to remove the last key, and removes every key of a caller otherwise', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    await runCli(['keys', 'add', '--caller-id', 'a'], env);
    await runCli(['keys', 'add', '--caller-id', 'a'], env);
    const last = await runCli(['keys', 'remove', '--caller-id', 'a'], env);
    expect(last.code).not.toBe(0);
    expect(last.stderr).toMatch(/last key/);
    expect((await runCli(['keys', 'list'], env)).stdout.match(/^a\s/gm)).toHaveLength(2);
    await runCli(['keys', 'add', '--caller-id', 'b'], env);
    expect((await runCli(['keys', 'remove', '--caller-id', 'a'], env)).code).toBe(0);
    const listed = (await runCli(['keys', 'list'], env)).stdout;
    expect(listed).not.toMatch(/^a\s/m);
    expect(listed).toMatch(/^b\s/m);
  });

  it('takes only visible ASCII caller ids, in ets keys add and in the keys a start reads', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    for (const id of ['alice\u200b', 'ali ce', 'аlice', 'alice\u00a0x']) {
      const r = await runCli(['keys', 'add', '--caller-id', id], env);
      expect({ id, code: r.code, stdout: r.stdout }).toEqual({ id, code: 2, stdout: '' });
      expect(r.stderr).toMatch(/--caller-id must be 1 to 256 visible ASCII characters/);
    }
    expect((await runCli(['keys', 'add', '--caller-id', 'team/agent-7@example.com'], env)).code).toBe(0);
    const record = { callerId: 'alice\u200b', keyHash: 'a'.repeat(64), credentialHolderType: 'USER', allowedCapabilities: [], allowedTenantIds: [] };
    const inline = await runCli(['serve'], { SVC_DATA_DIR: tmp(), SVC_PORT: '0', SVC_API_KEYS: JSON.stringify([record]) });
    expect(inline.code).toBe(2);
    expect(inline.stderr).toMatch(/callerId "alice\\u200b" is not valid/);
  });

  it("reserves the caller id 'system' (the proposer of shipped policies)", async () => {
    const env = { SVC_DATA_DIR: tmp() };
    const r = await runCli(['keys', 'add', '--caller-id', 'system', '--holder', 'USER'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/reserved/);
    const inline = await runCli(['serve'], { ...env, SVC_PORT: '0', SVC_API_KEYS: JSON.stringify([{ callerId: 'system', keyHash: 'a'.repeat(64), credentialHolderType: 'USER', allowedCapabilities: [], allowedTenantIds: [] }]) });
    expect(inline.code).toBe(2);
    expect(inline.stderr).toMatch(/reserved/);
  });

  it('registers a step-up key from stdin for USER keys only', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    const pem = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const ok = await runCli(['keys', 'add', '--caller-id', 'alice', '--holder', 'USER', '--step-up-key', '-'], env, pem);
    expect(ok.code).toBe(0);
    const notUser = await runCli(['keys', 'add', '--caller-id', 'bot', '--holder', 'SERVICE', '--step-up-key', '-'], env, pem);
    expect(notUser.code).not.toBe(0);
    expect(notUser.stderr).toMatch(/USER/);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const wrongKind = await runCli(['keys', 'add', '--caller-id', 'carol', '--holder', 'USER', '--step-up-key', '-'], env, rsa);
    expect(wrongKind.code).not.toBe(0);
    expect(wrongKind.stderr).toMatch(/Ed25519/);
    // A private key pasted by mistake is refused, never turned into its public half and stored.
    const privatePem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const secret = await runCli(['keys', 'add', '--caller-id', 'dave', '--holder', 'USER', '--step-up-key', '-'], env, privatePem);
    expect(secret.code).not.toBe(0);
    expect(allFileText(env.SVC_DATA_DIR)).not.toContain(privatePem.split('\n')[1]!);

    const server = await spawnServer(env);
    try {
      const me = await request(server.url).get('/callers/me').set('authorization', `Bearer ${ok.stdout.trim()}`);
      expect(me.body.stepUpKeyRegistered).toBe(true);
    } finally {
      await server.stop();
    }
  });

  it('refuses a step-up key that another caller has, whatever its PEM text; the same caller may reuse it for a new key', async () => {
    const env = { SVC_DATA_DIR: tmp() };
    const pem = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }) as string;
    expect((await runCli(['keys', 'add', '--caller-id', 'alice', '--holder', 'USER', '--step-up-key', '-'], env, pem)).code).toBe(0);
    const file = path.join(env.SVC_DATA_DIR, 'api-keys.json');
    const before = readFileSync(file, 'utf8');
    // The same key with other line breaks and spacing is the same key.
    const [head, body, tail] = pem.trim().split('\n');
    for (const text of [pem, `\n  ${head}\r\n${body!.slice(0, 20)}\r\n${body!.slice(20)}\r\n${tail}\n\n`]) {
      const taken = await runCli(['keys', 'add', '--caller-id', 'alice-2', '--holder', 'USER', '--step-up-key', '-'], env, text);
      expect({ code: taken.code, stdout: taken.stdout }).toEqual({ code: 2, stdout: '' });
      expect(taken.stderr).toMatch(/step-up key .*'alice'/);
      expect(readFileSync(file, 'utf8')).toBe(before);
    }
    // A second bearer key for alice with her own step-up key (a rotation) is fine.
    expect((await runCli(['keys', 'add', '--caller-id', 'alice', '--holder', 'USER', '--step-up-key', '-'], env, pem)).code).toBe(0);
  });

  it('refuses to start when two callers of the key file or SVC_API_KEYS share a step-up key, and writes nothing', async () => {
    const dataDir = tmp();
    const pem = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const record = (callerId: string, stepUpPublicKey: string) => ({ callerId, keyHash: 'a'.repeat(64), credentialHolderType: 'USER', allowedCapabilities: [], allowedTenantIds: [], stepUpPublicKey });
    const shared = [record('alice', pem), record('bob', generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }) as string), record('alice-2', pem.replace(/\n/g, '\r\n'))];
    writeFileSync(path.join(dataDir, 'api-keys.json'), JSON.stringify({ keys: shared }));
    for (const env of [{ SVC_DATA_DIR: dataDir }, { SVC_DATA_DIR: dataDir, SVC_API_KEYS: JSON.stringify(shared) }]) {
      const r = await runCli(['serve'], { ...env, SVC_PORT: '0' });
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/callers 'alice' and 'alice-2' have the same step-up key/);
    }
    expect(readdirSync(dataDir)).toEqual(['api-keys.json']);
  });
});

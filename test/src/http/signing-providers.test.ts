import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { verifyRecord } from '@ets/adapters-crypto';
import { silentLogger } from '@ets/domain';
import { loadSettings, startServer, type RunningServer } from '@ets/server';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  createSoftHsmToken,
  logMatchingRecords,
  makeKey,
  onDatabase,
  openCheckpointNote,
  publishPolicy,
  runCli,
  STORAGE_TARGETS,
  type ProvisionedTarget,
  type SoftHsmToken,
} from '@ets/test-support';

type Json = Record<string, unknown>;
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });

/**
 * Teams swap key providers: one database, served in turn from key files, an injected key, a
 * rotated injected key and a PKCS#11 module. Everything signed before a switch keeps verifying,
 * because every key that signed stays published.
 */
describe.each(STORAGE_TARGETS)('signing key providers swapped on one $name database', (factory) => {
  let db: ProvisionedTarget;
  let dataDir: string;
  let token: SoftHsmToken;
  const files = mkdtempSync(path.join(os.tmpdir(), 'ets-providers-'));

  beforeAll(async () => {
    db = await factory.provision();
    dataDir = db.target.kind === 'sqlite' ? path.dirname(db.target.file) : mkdtempSync(path.join(os.tmpdir(), 'ets-data-'));
    await onDatabase(db.target, publishPolicy);
    token = createSoftHsmToken('swap');
  });
  afterAll(async () => {
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(files, { recursive: true, force: true });
    token?.destroy();
  });

  const baseEnv = (): Record<string, string> => ({
    SVC_DATA_DIR: dataDir,
    ...(db.target.kind === 'postgres' ? { SVC_DATABASE_URL: db.target.url } : {}),
  });
  const start = (env: Record<string, string>): Promise<RunningServer> =>
    startServer(loadSettings({ SVC_PORT: '0', SVC_LOG_LEVEL: 'silent', ...apiKeysEnv(agent), ...baseEnv(), ...env }), silentLogger);
  const execute = async (server: RunningServer): Promise<Json> => {
    const res = await request(server.url).post('/execute').set('authorization', bearer(agent)).send(businessTransaction());
    expect(res.status).toBe(200);
    return res.body.trustRecord as Json;
  };
  const rotateEnv = async (env: Record<string, string>) => {
    const r = await runCli(['signing-keys', 'rotate'], { ...baseEnv(), SVC_SIGNING_PROVIDER: 'env', ...env });
    expect(r.code).toBe(0);
    return { ...(JSON.parse(r.stdout) as { keyId: string; environment: Record<string, string> }), stderr: r.stderr };
  };

  it('keeps every record verifiable across disk → env → rotated env → pkcs11, and the module key across a restart', async () => {
    const records: Json[] = [];
    const signedBy = async (env: Record<string, string>, provider: string) => {
      const server = await start(env);
      try {
        expect(server.signingKeys.provider).toBe(provider);
        records.push(await execute(server));
      } finally {
        await server.close();
      }
      // Profile A's /health names the provider that holds the key (spec 5.3 `signing_mode`).
      const attesting = await start({ ...env, SVC_PROFILE: 'attestation' });
      try {
        expect((await request(attesting.url).get('/health')).body).toMatchObject({ status: 'ok', signing_mode: provider });
      } finally {
        await attesting.close();
      }
    };

    await signedBy({}, 'disk');
    const first = await rotateEnv({});
    expect(first.stderr).toMatch(/shown only this once.*SVC_SIGNING_KEY_PEM/);
    await signedBy({ SVC_SIGNING_PROVIDER: 'env', SVC_SIGNING_KEY_PEM: first.environment.SVC_SIGNING_KEY_PEM! }, 'env');
    const second = await rotateEnv({ SVC_SIGNING_KEY_PEM: first.environment.SVC_SIGNING_KEY_PEM! });
    expect(second.stderr).toContain(`The current key ${first.keyId} stays published`);
    await signedBy({ SVC_SIGNING_PROVIDER: 'env', SVC_SIGNING_KEY_PEM: second.environment.SVC_SIGNING_KEY_PEM! }, 'env');
    await signedBy(token.env, 'pkcs11');

    const keyIds = records.map((r) => r.keyId);
    expect(new Set(keyIds).size).toBe(4);
    expect(keyIds.slice(1, 3)).toEqual([first.keyId, second.keyId]);

    // Restarted on the module: same keyId, and the JWKS still lists every key that signed.
    const server = await start(token.env);
    try {
      expect(server.signingKeys.activeKeyIds.keyId).toBe(keyIds[3]);
      const jwks = (await request(server.url).get('/.well-known/jwks.json')).body as { keys: Json[] };
      expect(jwks.keys.map((k) => k.kid)).toEqual(expect.arrayContaining(keyIds));
      expect(JSON.stringify(jwks)).not.toMatch(/"d"/);
      for (const record of records) {
        expect(verifyRecord(record, jwks)).toMatchObject({ valid: true });
        expect((await request(server.url).get(`/keys/${record.keyId}`)).status).toBe(200);
      }
      records.push(await execute(server));
      expect(records[4]!.keyId).toBe(keyIds[3]);

      // The transparency log's checkpoints, signed by whichever provider held the key at the time,
      // all verify with the JWKS and are one history over the one tree.
      const notes = (await server.dataSource.query('SELECT note FROM transparency_log_checkpoints ORDER BY tree_size')) as { note: string }[];
      expect(new Set(notes.map((n) => openCheckpointNote(n.note, jwks).keyName))).toEqual(new Set(keyIds));
      expect((await logMatchingRecords(server.dataSource)).problems).toEqual([]);

      // Offline, with the saved JWKS only: the record the module signed verifies with `ets verify`.
      const jwksFile = path.join(files, 'jwks.json');
      writeFileSync(jwksFile, JSON.stringify(jwks));
      for (const [n, record] of [records[3]!, records[0]!].entries()) {
        const file = path.join(files, `record-${n}.json`);
        writeFileSync(file, JSON.stringify(record));
        const verified = await runCli(['verify', file, '--keys', jwksFile], { SVC_DATA_DIR: files });
        expect(verified.stdout).toMatch(/signature.*ok/);
        expect(verified.code).toBe(0);
      }
    } finally {
      await server.close();
    }
  });
});

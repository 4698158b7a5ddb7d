import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import request from 'supertest';
import { apiKeysEnv, bearer, makeKey, postgresTarget, spawnServer, type ProvisionedTarget, type SpawnedServer } from '@ets/test-support';
import { envelope, policyDoc } from './governance-fixtures.js';

// Two `ets serve` processes (the built CLI: `npm run build` first) on one throwaway PostgreSQL database.
const alice = makeKey('alice', { holder: 'USER', stepUp: true });
const bob = makeKey('bob', { holder: 'USER', stepUp: true });
const carol = makeKey('carol', { holder: 'USER', stepUp: true });

describe('maker-checker across two server processes sharing PostgreSQL', () => {
  let db: ProvisionedTarget;
  let a: SpawnedServer;
  let b: SpawnedServer;
  const dirs: string[] = [];
  const query = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const client = new pg.Client({ connectionString: (db.target as { url: string }).url });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  };
  const start = () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-proc-'));
    dirs.push(dataDir);
    return spawnServer({ SVC_DATA_DIR: dataDir, SVC_DATABASE_URL: (db.target as { url: string }).url, ...apiKeysEnv(alice, bob, carol) });
  };

  beforeAll(async () => {
    db = await postgresTarget.provision();
    // Started at the same moment: migrations and the shipped-policy proposal race too.
    [a, b] = await Promise.all([start(), start()]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('proposes the shipped policy once, even when both start together, and again not after a restart', async () => {
    const shipped = () => query<{ id: string }>(`SELECT id FROM pending_changes WHERE subject = 'payments-transfer/1.0.0'`);
    expect(await shipped()).toHaveLength(1);
    const c = await start();
    await c.stop();
    expect(await shipped()).toHaveLength(1);
  }, 60_000);

  it('applies the same change approved at the same moment on both processes once: one 200, one 409', async () => {
    for (let round = 1; round <= 3; round++) {
      const version = `${round}.0.0`;
      const proposed = await request(a.url).post(`/policies/gov-test/${version}/pending-changes`).set('authorization', bearer(alice)).send({ proposedContent: policyDoc(version) });
      expect(proposed.status).toBe(201);
      const id = proposed.body.id as string;
      const [onA, onB] = await Promise.all([
        request(a.url).post(`/policies/pending-changes/${id}/approve`).set('authorization', bearer(bob)).send(envelope(bob, id, 'approve')),
        request(b.url).post(`/policies/pending-changes/${id}/approve`).set('authorization', bearer(carol)).send(envelope(carol, id, 'approve')),
      ]);
      expect([onA.status, onB.status].sort()).toEqual([200, 409]);
      const winner = onA.status === 200 ? onA : onB;
      expect(winner.body).toMatchObject({ id, status: 'APPROVED', appliedAt: expect.any(String) });
      const stored = await query<{ change_id: string; approved_by: string }>(`SELECT change_id, approved_by FROM policy_versions WHERE name = 'gov-test' AND version = $1`, [version]);
      expect(stored).toEqual([{ change_id: id, approved_by: winner.body.decider }]);
      // Both processes see the same version in effect.
      for (const s of [a, b]) {
        const inEffect = await request(s.url).get('/policies/in-effect').set('authorization', bearer(alice));
        expect(inEffect.body).toContainEqual(expect.objectContaining({ name: 'gov-test', version }));
      }
    }
  }, 60_000);

  it('accepts a nonce once across both processes', async () => {
    const ids: string[] = [];
    for (const v of ['9.1.0', '9.2.0']) {
      const res = await request(a.url).post(`/policies/gov-test/${v}/pending-changes`).set('authorization', bearer(alice)).send({ proposedContent: policyDoc(v) });
      ids.push(res.body.id as string);
    }
    const first = envelope(bob, ids[0]!, 'approve');
    const second = envelope(bob, ids[1]!, 'approve', { nonce: first.payload.nonce });
    const [r1, r2] = await Promise.all([
      request(a.url).post(`/policies/pending-changes/${ids[0]}/approve`).set('authorization', bearer(bob)).send(first),
      request(b.url).post(`/policies/pending-changes/${ids[1]}/approve`).set('authorization', bearer(bob)).send(second),
    ]);
    expect([r1.status, r2.status].sort()).toEqual([200, 409]);
    expect([r1.body.code, r2.body.code]).toContain('STEP_UP_NONCE_REUSED');
  }, 60_000);
});

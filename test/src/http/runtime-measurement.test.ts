import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { measureRuntime } from '@ets/server';
import {
  apiKeysEnv,
  bearer,
  cliOf,
  contentHash,
  copyInstall,
  makeKey,
  REPO_ROOT,
  serverStorageEnv,
  spawnServer,
  STORAGE_TARGETS,
  tempDirs,
  type ProvisionedTarget,
  type SpawnedServer,
} from '@ets/test-support';

// Needs the built CLI (`npm run build`). A spawned server runs the built code: its runtimeHash is
// the hash of those files, whatever digests the build recorded. Spec 4.2: profile A answers 503
// "runtime not configured" when the runtime cannot say what code it runs. A copy of the install
// without one of the server's production dependencies (pkcs11js, which only the PKCS#11 signing
// provider loads, so the server still starts on disk keys) is such a runtime.

const agent = makeKey('agent-7', { holder: 'SERVICE' });
const tmp = tempDirs('ets-unconfigured-');
const REASON = 'the production dependency pkcs11js of @ets/adapters-crypto is not installed';
let install: string;

beforeAll(() => {
  install = copyInstall(tmp(), { without: ['pkcs11js'] });
});

describe('a spawned server (the built code runs)', () => {
  let server: SpawnedServer;
  beforeAll(async () => {
    server = await spawnServer({ SVC_DATA_DIR: tmp(), ...apiKeysEnv(agent), SVC_PROFILE: 'attestation' }, 60_000);
  });
  afterAll(async () => {
    await server.stop();
  });

  it('signs a manifest whose runtimeHash is that of the built code and installed packages, as reading every file gives it', async () => {
    const m = (await (await fetch(`${server.url}/runtime/manifest`, { headers: { authorization: bearer(agent) } })).json()) as Record<string, unknown>;
    const measured = measureRuntime({ root: REPO_ROOT, runtimeVersion: String(m.version), code: 'built', digests: 'none' });
    if ('error' in measured) throw new Error(measured.error);
    expect(m.runtimeContents).toEqual(measured.runtimeContents);
    expect(m.evaluatorContents).toEqual(measured.evaluatorContents);
    expect(m.runtimeHash).toBe(contentHash(measured.runtimeContents));
    expect(m.evaluatorHash).toBe(contentHash(measured.evaluatorContents));
    expect(server.output()).toMatch(/"measured":\{"packages":\d+,"files":\d+,"hashedFiles":\d+,"ms":\d+,"waitedMs":\d+\}/);
  });
});

it('the copy is a whole install but for pkcs11js: with it linked back, its runtime is measured', () => {
  expect(measureRuntime({ root: install, runtimeVersion: 'b', code: 'built' })).toEqual({ error: REASON });
  symlinkSync(path.join(REPO_ROOT, 'node_modules', 'pkcs11js'), path.join(install, 'node_modules', 'pkcs11js'));
  try {
    expect(measureRuntime({ root: install, runtimeVersion: 'b', code: 'built', digests: 'none' })).toMatchObject({ runtimeContents: { code: 'built' } });
  } finally {
    // Back to the broken install the servers below run.
    rmSync(path.join(install, 'node_modules', 'pkcs11js'));
  }
});

describe.each(STORAGE_TARGETS)('a runtime that cannot be measured, on $name', (factory) => {
  let db: ProvisionedTarget;
  const servers: SpawnedServer[] = [];

  beforeAll(async () => {
    db = await factory.provision();
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    await db.drop();
  });

  const start = async (profile: string) => {
    const storage = serverStorageEnv(db.target, tmp);
    const s = await spawnServer({ ...storage, ...apiKeysEnv(agent), SVC_PROFILE: profile, CWD: install }, 60_000, cliOf(install));
    servers.push(s);
    return s;
  };
  const post = (s: SpawnedServer, route: string, body: object) =>
    fetch(`${s.url}${route}`, { method: 'POST', headers: { authorization: bearer(agent), 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it.each([
    ['attestation', { executionId: 'run-1', policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 1 } }, { executionId: 'a'.repeat(64), signature: 'x' }],
    ['attestation-simple', { policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 1 } }, { executionId: 'a'.repeat(64), decision: {}, execution_state: 'completed', runtimeHash: 'b'.repeat(64), signature: 'x' }],
  ])('SVC_PROFILE=%s starts, says why in its log and /health, and answers 503 on POST /execute and POST /verify', async (profile, executeBody, verifyBody) => {
    const s = await start(profile);
    for (const [route, body] of [['/execute', executeBody], ['/verify', verifyBody]] as const) {
      const res = await post(s, route, body);
      const error = ((await res.json()) as { error?: unknown }).error;
      expect({ route, status: res.status, error }).toEqual({ route, status: 503, error: `Runtime not configured: ${REASON}.` });
    }
    expect(await (await fetch(`${s.url}/health`)).json()).toMatchObject({ status: 'ok', runtimeVersion: null, runtimeHash: null, verification: 'error' });
    expect(s.output()).toContain(`"reason":"${REASON}"`);
    expect(s.output()).toContain('runtime not configured: profile-A routes that sign or verify answer 503');
    expect(await s.stop()).toBe(0);
  });
});

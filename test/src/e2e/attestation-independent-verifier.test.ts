import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import request from 'supertest';
import { apiKeysEnv, bearer, makeKey, publishPolicy, REPO_ROOT, sqliteTarget, startTestServer, type TestServer } from '@ets/test-support';

// A third party's verifier: the JWKS, an independent RFC 8785 implementation (the `canonicalize`
// package) and node:crypto. Nothing of this project's code checks anything below; the project only
// runs the server that produced the records.
const canonicalize = createRequire(import.meta.url)('canonicalize') as (value: unknown) => string;
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const H = (value: unknown) => sha256(canonicalize(value));
type Json = Record<string, unknown>;

function keyFor(jwks: { keys: Json[] }, kid: unknown): KeyObject | undefined {
  const jwk = jwks.keys.find((k) => k.kid === kid && k.kty === 'OKP' && k.crv === 'Ed25519');
  return jwk && createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x as string }, format: 'jwk' });
}
/** False for a key that is not published, as for a signature that does not verify. */
function ed25519(jwks: { keys: Json[] }, kid: unknown, data: string, signatureBase64: unknown): boolean {
  const key = keyFor(jwks, kid);
  return key !== undefined && verify(null, Buffer.from(data, 'utf8'), key, Buffer.from(String(signatureBase64), 'base64'));
}

/** {"<path inside the package>": sha256 of the file} for every file of an installed package but its own node_modules. */
function packageFiles(dir: string, sub = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(path.join(dir, sub), { withFileTypes: true })) {
    const rel = sub ? `${sub}/${entry.name}` : entry.name;
    if (entry.isDirectory() && entry.name !== 'node_modules') Object.assign(out, packageFiles(dir, rel));
    else if (entry.isFile()) out[rel] = createHash('sha256').update(readFileSync(path.join(dir, rel))).digest('hex');
  }
  return out;
}

/** Spec 2.9, as a third party reads it: the signature, the identity, the manifest signature. */
function checkAttestation(a: Json, jwks: { keys: Json[] }): string[] {
  const problems: string[] = [];
  const { signature, ...unsigned } = a;
  if (!ed25519(jwks, a.signerKeyId, canonicalize(unsigned), signature)) problems.push('signature');
  if (H({ requestId: a.requestId, policyId: a.policyId, policyVersion: a.policyVersion, signalsHash: a.signalsHash }) !== a.executionId) problems.push('executionId');
  const fingerprint = H({ executionId: a.executionId, bundleHash: a.bundleHash, evaluatorArtifactHash: a.evaluatorArtifactHash, signalsHash: a.signalsHash, decision: a.decision, execution_state: a.execution_state });
  if (fingerprint !== a.execution_fingerprint) problems.push('execution_fingerprint');
  if (!ed25519(jwks, a.signerKeyId, String(a.manifestHash), a.manifestSignature)) problems.push('manifestSignature');
  return problems;
}

describe('a verifier with only the JWKS, canonicalize and node:crypto', () => {
  const agent = makeKey('agent-7', { holder: 'SERVICE' });
  const ann = makeKey('ann', { holder: 'USER' });
  let server: TestServer;
  let jwks: { keys: Json[] };
  const post = (p: string, body: object) => request(server.url).post(p).set('authorization', bearer(agent)).send(body);

  beforeAll(async () => {
    server = await startTestServer(sqliteTarget, { ...apiKeysEnv(agent, ann), SVC_PROFILE: 'attestation' });
    await publishPolicy(server.dataSource);
    jwks = (await request(server.url).get('/.well-known/jwks.json')).body;
  });
  afterAll(async () => {
    await server.destroy();
  });

  it('verifies an attestation, its identity and its runtime manifest, and refuses a changed one', async () => {
    const signals = { amount: 120, country: 'FR' };
    const a = (await post('/execute', { executionId: 'independent-1', policyId: 'exec-test', policyVersion: '1.0.0', signals })).body.attestation as Json;
    expect(checkAttestation(a, jwks)).toEqual([]);
    expect(a.signalsHash).toBe(H(signals));

    const m = (await request(server.url).get('/runtime/manifest').set('authorization', bearer(agent))).body as Json;
    const { manifestHash, manifestSignature, ...manifest } = m;
    expect(H(manifest)).toBe(manifestHash);
    expect(ed25519(jwks, m.signerKeyId, String(manifestHash), manifestSignature)).toBe(true);
    for (const [field, from] of [['manifestHash', manifestHash], ['runtimeHash', m.runtimeHash], ['runtimeVersion', m.version], ['evaluatorHash', m.evaluatorHash], ['evaluatorSemanticHash', m.evaluatorSemanticHash], ['releaseManifestHash', m.releaseManifestHash], ['trustRootVersion', m.trustRootVersion]] as const) {
      expect({ field, value: a[field] }).toEqual({ field, value: from });
    }
    expect(m.trustRootVersion).toBe(H(jwks.keys.map((k) => k.kid).sort()));

    // What runtime: verified means: runtimeHash is H(C(the contents the manifest lists)), and each
    // listed package's hash is one the verifier can recompute from its own copy of that package.
    const contents = m.runtimeContents as { node: Json; packages: { name: string; version: string; path: string; kind: string; files: number; hash: string }[] };
    expect(H(contents)).toBe(m.runtimeHash);
    expect(H(m.evaluatorContents)).toBe(m.evaluatorHash);
    expect(contents.node).toEqual({ version: process.version, v8: process.versions.v8, openssl: process.versions.openssl, platform: process.platform, arch: process.arch });
    const express = contents.packages.find((p) => p.name === 'express')!;
    const files = packageFiles(path.join(REPO_ROOT, express.path));
    expect(express).toEqual({ name: 'express', version: JSON.parse(readFileSync(path.join(REPO_ROOT, express.path, 'package.json'), 'utf8')).version, path: 'node_modules/express', kind: 'dependency', files: Object.keys(files).length, hash: H({ files }) });

    for (const field of Object.keys(a).filter((f) => f !== 'signature')) {
      const v = a[field];
      const tampered = { ...a, [field]: typeof v === 'string' ? `${v}x` : { ...(v as Json), reason: 'x' } };
      expect({ field, problems: checkAttestation(tampered, jwks) }).toEqual({ field, problems: expect.arrayContaining(['signature']) });
    }
  });

  it('verifies a signed override resolution and a confirmation proof (compact JWS) the same way', async () => {
    const pending = (await post('/execute', { executionId: 'independent-2', policyId: 'exec-test', policyVersion: '1.0.0', signals: { amount: 20000 } })).body.attestation as Json;
    const decided = await request(server.url).post('/override').set('authorization', bearer(ann)).send({ executionId: pending.executionId, approved: true, approvedBy: 'ann', approverRole: 'risk', reason: 'ok' });
    const resolution = decided.body.resolution as Json;
    const { signature, pqSignature: _pq, ...unsigned } = resolution;
    expect(ed25519(jwks, resolution.keyId, canonicalize(unsigned), signature)).toBe(true);

    const confirmed = (await post('/confirm-execution', { attestation: pending, executedAction: { actionType: 'payment', actionId: 'p-1', actionTimestamp: new Date().toISOString() } })).body as Json;
    const [header, payload, sig] = String(confirmed.proof).split('.');
    const { kid, alg } = JSON.parse(Buffer.from(header!, 'base64url').toString('utf8')) as Json;
    expect(alg).toBe('EdDSA');
    expect(verify(null, Buffer.from(`${header}.${payload}`, 'ascii'), keyFor(jwks, kid)!, Buffer.from(sig!, 'base64url'))).toBe(true);
    expect(JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'))).toMatchObject({ executionId: pending.executionId, attestationHash: H(pending), matched: true });
  });
});

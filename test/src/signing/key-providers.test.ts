import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  EnvKeyProvider,
  KeyRing,
  KeyRingSigner,
  Pkcs11KeyProvider,
  ServiceSigningKeys,
  ed25519KeyId,
  verifyDetached,
  verifyRecord,
  type KeyProvider,
  type RotationOutcome,
  type SigningMode,
} from '@ets/adapters-crypto';
import type { PublishedKeyStore } from '@ets/domain';
import { createSoftHsmToken, memoryPublishedKeyStore, tempDirs, type SoftHsmToken } from '@ets/test-support';

/**
 * The signing contract: whatever provider holds the keys, records are signed the same way, verify
 * offline with the published keys, keep their keyId across restarts, and stay verifiable after a
 * rotation. One suite, run on every provider.
 */
interface ProviderFixture {
  name: 'disk' | 'env' | 'pkcs11';
  /** Opens the provider as a (re)start of the service would. */
  open(mode?: SigningMode): Promise<KeyProvider>;
  /** What the operator does after `rotate` before restarting (env: install the new values). */
  install(outcome: RotationOutcome): void;
}

const tmp = tempDirs('ets-provider-');
let token: SoftHsmToken;

const disk = (): ProviderFixture => {
  // One data dir per mode: hybrid refuses a data dir whose Ed25519 keys have no ML-DSA-65 partner.
  const dataDirs = new Map<SigningMode, string>();
  const dataDir = (mode: SigningMode) => {
    if (!dataDirs.has(mode)) dataDirs.set(mode, tmp());
    return dataDirs.get(mode)!;
  };
  return { name: 'disk', open: (mode = 'ed25519') => KeyRing.open({ dataDir: dataDir(mode), mode }), install: () => undefined };
};

const env = (): ProviderFixture => {
  let values: Record<string, string> | undefined;
  return {
    name: 'env',
    async open(mode = 'ed25519') {
      // The operator's first values come from `ets signing-keys rotate`, i.e. EnvKeyProvider.generate.
      if (!values || (mode === 'hybrid' && !values.SVC_SIGNING_PQ_KEY_PEM)) values = { ...(await EnvKeyProvider.generate(mode)).environment };
      return EnvKeyProvider.open({ mode, ed25519Pem: values.SVC_SIGNING_KEY_PEM, mlDsa65Pem: values.SVC_SIGNING_PQ_KEY_PEM });
    },
    install(outcome) {
      expect(outcome.kind).toBe('handOver');
      if (outcome.kind === 'handOver') values = { ...outcome.environment };
    },
  };
};

const pkcs11 = (): ProviderFixture => ({
  name: 'pkcs11',
  open: (mode = 'ed25519') => Pkcs11KeyProvider.open({ module: token.module, token: token.label, pin: token.pin, mode }),
  install: () => undefined,
});

beforeAll(() => {
  token = createSoftHsmToken('contract');
});
afterAll(() => {
  token?.destroy();
});

describe.each([
  { name: 'disk', make: disk },
  { name: 'env', make: env },
  { name: 'pkcs11', make: pkcs11 },
])(
  'signing contract on the $name provider',
  ({ make }) => {
    let fixture: ProviderFixture;
    const opened: KeyProvider[] = [];
    const open = async (store?: PublishedKeyStore, mode?: SigningMode) => {
      const provider = await fixture.open(mode);
      opened.push(provider);
      return ServiceSigningKeys.open(provider, store ? { store } : {});
    };
    beforeAll(() => {
      fixture = make();
    });
    afterAll(async () => {
      for (const p of opened.splice(0)) await p.close();
    });

    it('signs records and detached text that verify offline with the published keys; a changed record does not', async () => {
      const keys = await open(memoryPublishedKeyStore());
      expect(keys.provider).toBe(fixture.name);
      const signer = new KeyRingSigner(keys);
      const record = await signer.sign({ kind: 'refusal', reason: 'Country is sanctioned', amount: 120 });
      const jwks = keys.jwks();

      expect(record.keyId).toBe(keys.activeKeyIds.keyId);
      const jwk = jwks.keys.find((k) => k.kid === record.keyId) as { kty: string; crv: string; x: string };
      expect(jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
      expect(record.keyId).toBe(await ed25519KeyId(jwk.x));
      expect(verifyRecord(record, jwks)).toEqual({ valid: true, keyId: record.keyId, errors: [] });
      expect(verifyRecord({ ...record, amount: 121 }, jwks).valid).toBe(false);

      const chain = await signer.signText('a1b2c3');
      expect(verifyDetached('a1b2c3', chain, jwks).valid).toBe(true);
      expect(verifyDetached('a1b2c4', chain, jwks).valid).toBe(false);
      // Ed25519 is deterministic: the Ed25519-only path makes the very same signature.
      expect(await signer.signText('a1b2c3', 'ed25519')).toEqual(chain);
    });

    it('keeps its keyIds across a restart', async () => {
      const first = await open();
      const { keyId } = first.activeKeyIds;
      await first.close();
      const second = await open();
      expect(second.activeKeyIds).toEqual({ keyId });
      expect(second.jwks()).toEqual(first.jwks());
    });

    it('signs many records at once, each verifying', async () => {
      const keys = await open();
      const signer = new KeyRingSigner(keys);
      const records = await Promise.all(Array.from({ length: 64 }, (_, n) => signer.sign({ n })));
      for (const record of records) expect(verifyRecord(record, keys.jwks()).valid).toBe(true);
    });

    it('rotates: records signed before verify with the published keys, and the JWKS lists every key that signed', async () => {
      const store = memoryPublishedKeyStore();
      const before = await open(store);
      const oldRecord = await new KeyRingSigner(before).sign({ n: 'before' });

      const rotated = await (opened[opened.length - 1]!).rotate();
      expect(rotated.active.keyId).not.toBe(oldRecord.keyId);
      fixture.install(rotated);
      await before.close();

      const after = await open(store);
      expect(after.activeKeyIds.keyId).toBe(rotated.active.keyId);
      const newRecord = await new KeyRingSigner(after).sign({ n: 'after' });
      expect(newRecord.keyId).toBe(rotated.active.keyId);
      const jwks = after.jwks();
      expect(jwks.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldRecord.keyId, newRecord.keyId]));
      expect(verifyRecord(oldRecord, jwks).valid).toBe(true);
      expect(verifyRecord(newRecord, jwks).valid).toBe(true);
      expect(after.keys().find((k) => k.keyId === oldRecord.keyId)).toMatchObject({ active: false });
      expect(after.keys().find((k) => k.keyId === newRecord.keyId)).toMatchObject({ active: true, heldBy: 'provider' });
    });

    it('publishes public keys only', async () => {
      const keys = await open(memoryPublishedKeyStore());
      const published = JSON.stringify({ jwks: keys.jwks(), keys: keys.keys(), provider: (opened[opened.length - 1]!).keys() });
      expect(published).not.toMatch(/"d"|PRIVATE|"pem"/i);
      for (const key of (opened[opened.length - 1]!).keys()) expect(Object.keys(key).sort()).toEqual(expect.arrayContaining(['active', 'alg', 'keyId', 'publicKey']));
    });

    it('in hybrid mode signs with Ed25519 and ML-DSA-65 where the provider can hold both, and refuses to open where it cannot', async () => {
      if (fixture.name === 'pkcs11') {
        await expect(fixture.open('hybrid')).rejects.toThrow(/hybrid signing cannot use the pkcs11 key provider/);
        return;
      }
      const keys = await open(undefined, 'hybrid');
      const record = await new KeyRingSigner(keys).sign({ n: 'hybrid' });
      expect(record.pqKeyId).toBe(keys.activeKeyIds.pqKeyId);
      expect(keys.jwks().keys.find((k) => k.kid === record.pqKeyId)).toMatchObject({ kty: 'AKP', alg: 'ML-DSA-65' });
      expect(verifyRecord(record, keys.jwks()).valid).toBe(true);
      expect(verifyRecord({ ...record, pqSignature: undefined }, keys.jwks()).valid).toBe(false);
      const data = Buffer.from('a1b2c3');
      expect(await keys.signingKeys().signEd25519(data)).toBe((await keys.signingKeys().sign(data)).signature);
    });
  },
);

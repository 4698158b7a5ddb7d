import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRequire } from 'node:module';
import type * as Pkcs11Binding from 'pkcs11js';
import {
  KeyRingSigner,
  Pkcs11KeyProvider,
  Pkcs11SetupError,
  PUBLIC_KEY_CACHE_MS,
  ServiceSigningKeys,
  verifyRecord,
  type KeyProvider,
} from '@ets/adapters-crypto';
import { createSoftHsmToken, memoryPublishedKeyStore, type SoftHsmToken } from '@ets/test-support';

const pkcs11js = createRequire(import.meta.url)('pkcs11js') as typeof Pkcs11Binding;

let token: SoftHsmToken;
const opened: KeyProvider[] = [];
const open = async (over: { pin?: string; token?: string; module?: string } = {}) => {
  const provider = await Pkcs11KeyProvider.open({ module: over.module ?? token.module, token: over.token ?? token.label, pin: over.pin ?? token.pin, mode: 'ed25519' });
  opened.push(provider);
  return provider;
};

beforeAll(() => {
  token = createSoftHsmToken('pkcs11');
});
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
  token?.destroy();
});

describe('the pkcs11 key provider', () => {
  it('generates the key in the token as sensitive, not extractable and for signing only; its private value cannot be read', async () => {
    const provider = await open();
    // Two pairs: the one the first start made and one made by a rotation, both by the same template.
    await provider.rotate();
    // A second look at the token through the binding itself, as an auditor of the HSM would.
    const lib = new pkcs11js.PKCS11();
    lib.load(token.module);
    // The provider has initialised the module and logged this process in already.
    const tolerating = (code: number, call: () => void) => {
      try {
        call();
      } catch (e) {
        if ((e as { code?: number }).code !== code) throw e;
      }
    };
    tolerating(pkcs11js.CKR_CRYPTOKI_ALREADY_INITIALIZED, () => lib.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK }));
    try {
      const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === token.label)!;
      const session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
      /** The boolean attributes `types` of an object, by name, as the token reports them. */
      const usages = (handle: Buffer, types: Record<string, number>): Record<string, boolean> => {
        const values = lib.C_GetAttributeValue(session, handle, Object.values(types).map((type) => ({ type })));
        return Object.fromEntries(Object.keys(types).map((name, i) => [name, (values[i]!.value as Buffer)[0] === 1]));
      };
      tolerating(pkcs11js.CKR_USER_ALREADY_LOGGED_IN, () => lib.C_Login(session, pkcs11js.CKU_USER, token.pin));
      lib.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY }]);
      const privateKeys = lib.C_FindObjects(session, 10);
      lib.C_FindObjectsFinal(session);
      expect(privateKeys.length).toBeGreaterThanOrEqual(2);
      for (const handle of privateKeys) {
        const [sensitive, extractable, label] = lib.C_GetAttributeValue(session, handle, [
          { type: pkcs11js.CKA_SENSITIVE },
          { type: pkcs11js.CKA_EXTRACTABLE },
          { type: pkcs11js.CKA_LABEL },
        ]);
        expect(sensitive!.value).toEqual(Buffer.from([1]));
        expect(extractable!.value).toEqual(Buffer.from([0]));
        expect((label!.value as Buffer).toString()).toMatch(/^ets-signing \d{4}-\d\d-\d\dT/);
        expect(() => lib.C_GetAttributeValue(session, handle, [{ type: pkcs11js.CKA_VALUE }])).toThrow(/CKR_ATTRIBUTE_SENSITIVE/);
        // Sign only: a module's defaults may allow more (SoftHSM2 allows decrypt and unwrap), and a
        // signing key that also decrypts or unwraps is a key that can be used for what it was not made for.
        expect(usages(handle, { CKA_SIGN: pkcs11js.CKA_SIGN, CKA_DECRYPT: pkcs11js.CKA_DECRYPT, CKA_UNWRAP: pkcs11js.CKA_UNWRAP, CKA_DERIVE: pkcs11js.CKA_DERIVE })).toEqual({
          CKA_SIGN: true,
          CKA_DECRYPT: false,
          CKA_UNWRAP: false,
          CKA_DERIVE: false,
        });
      }
      lib.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY }]);
      const publicKeys = lib.C_FindObjects(session, 10);
      lib.C_FindObjectsFinal(session);
      expect(publicKeys.length).toBeGreaterThanOrEqual(2);
      for (const handle of publicKeys) {
        expect(usages(handle, { CKA_VERIFY: pkcs11js.CKA_VERIFY, CKA_ENCRYPT: pkcs11js.CKA_ENCRYPT, CKA_WRAP: pkcs11js.CKA_WRAP, CKA_DERIVE: pkcs11js.CKA_DERIVE })).toEqual({
          CKA_VERIFY: true,
          CKA_ENCRYPT: false,
          CKA_WRAP: false,
          CKA_DERIVE: false,
        });
      }
      lib.C_CloseSession(session);
    } finally {
      // The provider still holds the module open in this process: leave it initialised.
      lib.close();
    }
    expect(provider.keys().map((k) => k.keyId)).toContain(provider.activeKeyIds.keyId);
  });

  it('signs through a few pooled sessions, not one per signature', async () => {
    const provider = await open();
    const signer = new KeyRingSigner(provider);
    for (let i = 0; i < 20; i++) await signer.sign({ i });
    expect((provider as Pkcs11KeyProvider).openSessions).toBe(1);
    const records = await Promise.all(Array.from({ length: 200 }, (_, i) => signer.sign({ i })));
    expect((provider as Pkcs11KeyProvider).openSessions).toBeLessThanOrEqual(4);
    const jwks = { keys: provider.keys().map((k) => ({ kty: 'OKP', crv: 'Ed25519', x: k.publicKey, kid: k.keyId })) };
    expect(records.every((r) => verifyRecord(r, jwks).valid)).toBe(true);
  });

  it('caches public keys read from the module for 5 minutes (spec 8); the signing key changes only on restart', async () => {
    let now = Date.parse('2026-03-01T00:00:00Z');
    const keys = await ServiceSigningKeys.open(await open(), { store: memoryPublishedKeyStore(), now: () => now });
    const signingKeyId = keys.activeKeyIds.keyId;

    // Another process (ets signing-keys rotate) adds a key to the token.
    const rotated = await (await open()).rotate();
    const newKid = rotated.active.keyId;
    const published = () => keys.jwks().keys.map((k) => k.kid);

    now += PUBLIC_KEY_CACHE_MS - 1;
    expect(published()).not.toContain(newKid);
    await new Promise((r) => setTimeout(r, 100));
    expect(published()).not.toContain(newKid);

    now += 1;
    published(); // the first read after five minutes starts a refresh and is served the cached set
    for (let i = 0; i < 50 && !published().includes(newKid); i++) await new Promise((r) => setTimeout(r, 20));
    expect(published()).toContain(newKid);
    expect(keys.activeKeyIds.keyId).toBe(signingKeyId);
    expect(keys.keys().find((k) => k.keyId === newKid)).toMatchObject({ active: false, heldBy: 'provider' });
  });

  describe('refusals', () => {
    // Login belongs to the process: with the module closed, the PIN is really checked.
    beforeAll(async () => {
      for (const p of opened.splice(0)) await p.close();
    });

    it.each([
      ['a module that cannot be opened', { module: '/nonexistent/libpkcs11.so' }, 'SVC_PKCS11_MODULE', /cannot open the PKCS#11 module SVC_PKCS11_MODULE=\/nonexistent\/libpkcs11\.so/],
      ['a library that is not a PKCS#11 module', { module: 'libz.so.1' }, 'SVC_PKCS11_MODULE', /cannot open the PKCS#11 module.*C_GetFunctionList/],
      ['a token label not found', { token: 'no-such-token' }, 'SVC_PKCS11_TOKEN', /no token labelled "no-such-token".*tokens present: /],
      ['a wrong PIN', { pin: '999999-wrong' }, 'SVC_PKCS11_PIN', /refused the PIN.*CKR_PIN_INCORRECT/],
    ])('refuses %s in one line naming the setting, never the PIN', async (_what, over, setting, message) => {
      const error = await open(over).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Pkcs11SetupError);
      expect((error as Pkcs11SetupError).setting).toBe(setting);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain('\n');
      expect((error as Error).message).not.toContain(token.pin);
      expect((error as Error).message).not.toContain('999999-wrong');
    });
  });
});

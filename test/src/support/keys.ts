import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';

export interface TestKey {
  raw: string;
  record: Record<string, unknown>;
  /** Step-up private key PEM (USER keys made with `stepUp: true`). */
  stepUpPrivateKeyPem?: string;
}

/** A key record as the server's SVC_API_KEYS takes it, with its raw bearer key. */
export function makeKey(callerId: string, opts: { holder?: string; capabilities?: string[]; principals?: string[]; tenants?: string[]; stepUp?: boolean } = {}): TestKey {
  const raw = 'pk_local_' + randomBytes(24).toString('base64url');
  let stepUpPrivateKeyPem: string | undefined;
  let stepUpPublicKey: string | undefined;
  if (opts.stepUp) {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    stepUpPrivateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    stepUpPublicKey = publicKey.export({ type: 'spki', format: 'pem' }) as string;
  }
  return {
    raw,
    stepUpPrivateKeyPem,
    record: {
      callerId,
      keyHash: createHash('sha256').update(raw).digest('hex'),
      ...(opts.holder ? { credentialHolderType: opts.holder } : {}),
      allowedCapabilities: opts.capabilities ?? [],
      ...(opts.principals ? { allowedPrincipalIds: opts.principals } : {}),
      allowedTenantIds: opts.tenants ?? [],
      ...(stepUpPublicKey ? { stepUpPublicKey } : {}),
      createdAt: new Date().toISOString(),
    },
  };
}

export const apiKeysEnv = (...keys: TestKey[]): { SVC_API_KEYS: string } => ({ SVC_API_KEYS: JSON.stringify(keys.map((k) => k.record)) });
export const bearer = (k: TestKey | string): string => `Bearer ${typeof k === 'string' ? k : k.raw}`;

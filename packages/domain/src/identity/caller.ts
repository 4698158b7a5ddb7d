/** Spec 2.7: who is calling, as established by caller authentication. */
export const HOLDER_TYPES = ['USER', 'ROLE', 'SERVICE', 'ORGANIZATION'] as const;
export type CredentialHolderType = (typeof HOLDER_TYPES)[number];

export interface Caller {
  callerId: string;
  credentialHolderType?: CredentialHolderType;
  /** `*` allows every capability; empty allows none. */
  allowedCapabilities: readonly string[];
  /** Empty means "only the caller's own id" (spec 5.7). */
  allowedPrincipalIds: readonly string[];
  allowedTenantIds: readonly string[];
  /** Ed25519 public key (PEM) used to check step-up envelopes; only for USER holders. */
  stepUpPublicKeyPem?: string;
}

/** The stored form of an API key: only a SHA-256 hash of the raw key is ever kept. */
export interface ApiKeyRecord {
  callerId: string;
  keyHash: string;
  credentialHolderType?: CredentialHolderType;
  allowedCapabilities: string[];
  allowedPrincipalIds?: string[];
  allowedTenantIds: string[];
  stepUpPublicKey?: string;
  createdAt: string;
}

export const isVerifiedHuman = (caller: Caller): boolean => caller.credentialHolderType === 'USER';

export function mayRequestCapability(caller: Caller, capability: string): boolean {
  return caller.allowedCapabilities.includes('*') || caller.allowedCapabilities.includes(capability);
}

export function mayAssertPrincipal(caller: Caller, principalId: unknown): boolean {
  if (typeof principalId !== 'string' || principalId === '') return false;
  return caller.allowedPrincipalIds.length > 0
    ? caller.allowedPrincipalIds.includes(principalId)
    : principalId === caller.callerId;
}

export function mayUseTenant(caller: Caller, tenantId: string | undefined): boolean {
  return tenantId === undefined || caller.allowedTenantIds.includes(tenantId);
}

export function callerFromKeyRecord(record: ApiKeyRecord): Caller {
  return {
    callerId: record.callerId,
    credentialHolderType: record.credentialHolderType,
    allowedCapabilities: record.allowedCapabilities ?? [],
    allowedPrincipalIds: record.allowedPrincipalIds ?? [],
    allowedTenantIds: record.allowedTenantIds ?? [],
    stepUpPublicKeyPem: record.credentialHolderType === 'USER' ? record.stepUpPublicKey : undefined,
  };
}

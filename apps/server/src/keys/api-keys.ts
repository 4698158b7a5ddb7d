import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { isEd25519PublicKeyPem, parseEd25519PublicKeyPem } from '@ets/adapters-crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { callerFromKeyRecord, DEMO_APPROVER_ID, HOLDER_TYPES, isName, NAME_RULES, SYSTEM_PROPOSER, type ApiKeyRecord, type ApproverDirectory, type Caller, type CallerDirectory, type SessionKeys } from '@ets/domain';
import { ConfigError } from '../config/settings.js';
import { writeFileAtomic } from '../write-file-atomic.js';

export const RAW_KEY_PREFIX = 'pk_local_';

/** A new raw key: shown once to the operator, never stored. */
export const generateRawKey = (): string => RAW_KEY_PREFIX + randomBytes(32).toString('base64url');

/** Only this hash of a key is ever stored (spec 2.7, 5.3). */
export const hashKey = (raw: string): string => createHash('sha256').update(raw, 'utf8').digest('hex');

const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string' && s.length > 0);

/** Checks one stored key record; returns a message naming what is wrong, or undefined. */
export function keyRecordProblem(r: unknown): string | undefined {
  if (typeof r !== 'object' || r === null) return 'a key record must be an object';
  const k = r as Partial<ApiKeyRecord>;
  if (typeof k.callerId !== 'string' || k.callerId.trim() === '') return 'callerId must be a non-empty string';
  // `system` proposes the policies shipped with the product; no key may act under that name.
  if (k.callerId === SYSTEM_PROPOSER) return `callerId '${SYSTEM_PROPOSER}' is reserved for the service itself`;
  // The demo approver's private key is published: no key may act under its name.
  if (k.callerId === DEMO_APPROVER_ID) return `callerId '${DEMO_APPROVER_ID}' is reserved for the demo approver of sandbox mode`;
  if (typeof k.keyHash !== 'string' || !/^[0-9a-f]{64}$/.test(k.keyHash)) return `keyHash of ${k.callerId} must be a SHA-256 hex digest`;
  if (k.credentialHolderType !== undefined && !HOLDER_TYPES.includes(k.credentialHolderType)) {
    return `credentialHolderType of ${k.callerId} must be one of ${HOLDER_TYPES.join(', ')}`;
  }
  for (const field of ['allowedCapabilities', 'allowedTenantIds'] as const) {
    if (k[field] !== undefined && !isStringList(k[field])) return `${field} of ${k.callerId} must be a list of strings`;
  }
  if (k.allowedPrincipalIds !== undefined && !isStringList(k.allowedPrincipalIds)) return `allowedPrincipalIds of ${k.callerId} must be a list of strings`;
  if (k.stepUpPublicKey !== undefined) {
    if (k.credentialHolderType !== 'USER') return `a step-up key is allowed only for holder type USER (${k.callerId})`;
    if (typeof k.stepUpPublicKey !== 'string' || !isEd25519PublicKeyPem(k.stepUpPublicKey)) return `stepUpPublicKey of ${k.callerId} must be an Ed25519 public key in PEM`;
  }
  return undefined;
}

/**
 * The caller, other than `callerId`, whose step-up key is `pem`'s key, compared as keys (raw
 * public key bytes), not as PEM text. One step-up key is one person: behind two caller ids it would
 * let one person propose a change and approve it (CONTRACT "Review rules, round 2").
 */
export function otherHolderOfStepUpKey(records: readonly ApiKeyRecord[], pem: string, callerId: string): string | undefined {
  const key = parseEd25519PublicKeyPem(pem);
  if (key === undefined) return undefined;
  return records.find((r) => r.callerId !== callerId && r.stepUpPublicKey !== undefined && parseEd25519PublicKeyPem(r.stepUpPublicKey) === key)?.callerId;
}

/** `text` as a JSON string whose every character outside visible ASCII is escaped, so that an invisible one shows. */
const visibly = (text: string): string => JSON.stringify(text).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/**
 * What a start refuses in key records that `ets keys` can still read (so that it can fix them): a
 * caller id that is not visible ASCII (CALLER_ID_PATTERN: `alice` followed by an invisible character
 * would look like alice in every record), or two callers sharing a step-up key. A message naming
 * the callers, or undefined.
 */
export function keyRecordsStartProblem(records: readonly ApiKeyRecord[]): string | undefined {
  const lookAlike = records.find((r) => !isName('callerId', r.callerId));
  if (lookAlike) {
    return `callerId ${visibly(lookAlike.callerId)} is not valid: a caller id is ${NAME_RULES.callerId.says}; remove it (ets keys remove --caller-id …) and add it again under a valid id`;
  }
  for (const [i, r] of records.entries()) {
    if (r.stepUpPublicKey === undefined) continue;
    const other = otherHolderOfStepUpKey(records.slice(i + 1), r.stepUpPublicKey, r.callerId);
    if (other !== undefined) {
      return `callers '${r.callerId}' and '${other}' have the same step-up key, so one person could propose a change and approve it; give each their own (ets keys remove --caller-id ${other}, then ets keys add … --step-up-key -)`;
    }
  }
  return undefined;
}

function normalise(r: ApiKeyRecord): ApiKeyRecord {
  return {
    ...r,
    allowedCapabilities: r.allowedCapabilities ?? [],
    allowedTenantIds: r.allowedTenantIds ?? [],
    createdAt: r.createdAt ?? new Date(0).toISOString(),
  };
}

export function parseKeyRecords(json: string, origin: string): ApiKeyRecord[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new ConfigError(`Invalid key records in ${origin}: not JSON.`);
  }
  const list = Array.isArray(parsed) ? parsed : (parsed as { keys?: unknown })?.keys;
  if (!Array.isArray(list)) throw new ConfigError(`Invalid key records in ${origin}: expected a JSON array of key records.`);
  list.forEach((r, i) => {
    const problem = keyRecordProblem(r);
    if (problem) throw new ConfigError(`Invalid key record #${i + 1} in ${origin}: ${problem}.`);
  });
  return (list as ApiKeyRecord[]).map(normalise);
}

/** The key file: `{ "keys": [ … ] }`, written atomically with mode 0600. */
export class ApiKeyFile {
  constructor(readonly file: string) {}

  exists(): boolean {
    return existsSync(this.file);
  }

  read(): ApiKeyRecord[] {
    if (!this.exists()) return [];
    return parseKeyRecords(readFileSync(this.file, 'utf8'), this.file);
  }

  write(records: ApiKeyRecord[]): void {
    mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    writeFileAtomic(this.file, JSON.stringify({ keys: records }, null, 2) + '\n', { mode: 0o600 });
  }
}

const keyRefOfHash = (keyHash: Buffer): string => createHash('sha256').update('ets-console-key-ref:').update(keyHash).digest('hex');

/**
 * Resolves bearer keys. Every configured hash is compared with timingSafeEqual, without stopping
 * at the first match, so the time taken does not tell which (or whether a) key matched.
 */
export class ApiKeyDirectory implements CallerDirectory, ApproverDirectory, SessionKeys {
  private readonly entries: { hash: Buffer; caller: Caller }[];
  private readonly byKeyRef: Map<string, Caller>;

  constructor(records: readonly ApiKeyRecord[]) {
    this.entries = records.map((r) => ({ hash: Buffer.from(r.keyHash, 'hex'), caller: callerFromKeyRecord(r) }));
    this.byKeyRef = new Map(this.entries.map((e) => [keyRefOfHash(e.hash), e.caller]));
  }

  get size(): number {
    return this.entries.length;
  }

  authenticate(rawKey: string): Caller | undefined {
    const presented = createHash('sha256').update(rawKey, 'utf8').digest();
    let found: Caller | undefined;
    for (const e of this.entries) {
      if (timingSafeEqual(e.hash, presented) && !found) found = e.caller;
    }
    return found;
  }

  /**
   * The reference a console session keeps of the key that signed in: a hash of the key's stored
   * hash, so the session table holds neither the key nor anything the key file holds.
   */
  keyRefOf(rawKey: string): string | undefined {
    const ref = keyRefOfHash(createHash('sha256').update(rawKey, 'utf8').digest());
    return this.byKeyRef.has(ref) ? ref : undefined;
  }

  /** The caller of a session's key, while that key is configured. */
  callerOfKeyRef(keyRef: string): Caller | undefined {
    return this.byKeyRef.get(keyRef);
  }

  /** The step-up keys of a verified human (USER keys with a step-up key): who may sign approvals. */
  stepUpKeysOf(callerId: string): string[] {
    return this.entries.flatMap(({ caller }) => (caller.callerId === callerId && caller.credentialHolderType === 'USER' && caller.stepUpPublicKeyPem ? [caller.stepUpPublicKeyPem] : []));
  }
}

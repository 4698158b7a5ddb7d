import type { ApiKeyRecord } from '@ets/domain';
import type { Settings } from '../config/settings.js';
import { ApiKeyFile, generateRawKey, hashKey, parseKeyRecords } from './api-keys.js';

/** Where the server's key records come from: SVC_API_KEYS wins over the key file. */
export function loadKeyRecords(settings: Settings): ApiKeyRecord[] {
  if (settings.apiKeysInline !== undefined) return parseKeyRecords(settings.apiKeysInline, 'SVC_API_KEYS');
  return new ApiKeyFile(settings.apiKeysFile).read();
}

/** The caller id of the key a first start issues. */
export const FIRST_KEY_CALLER_ID = 'operator';

export interface FirstKey {
  record: ApiKeyRecord;
  /** Shown once to the operator, stored nowhere. */
  rawKey: string;
}

/**
 * The configured key records, and on a first start with no key configured one new USER key (all
 * capabilities). The new key is not written yet: `persistFirstKey` stores its hash only once the
 * server listens, so a start that fails (port in use, bad host) leaves no key that nobody was shown.
 */
export function keyRecordsForStart(settings: Settings): { records: ApiKeyRecord[]; firstKey?: FirstKey } {
  const records = loadKeyRecords(settings);
  if (records.length > 0 || settings.apiKeysInline !== undefined || settings.authDisabled) return { records };
  const rawKey = generateRawKey();
  const record: ApiKeyRecord = {
    callerId: FIRST_KEY_CALLER_ID,
    keyHash: hashKey(rawKey),
    credentialHolderType: 'USER',
    allowedCapabilities: ['*'],
    allowedTenantIds: [],
    createdAt: new Date().toISOString(),
  };
  return { records: [record], firstKey: { record, rawKey } };
}

export function persistFirstKey(settings: Settings, key: FirstKey): void {
  new ApiKeyFile(settings.apiKeysFile).write([key.record]);
}

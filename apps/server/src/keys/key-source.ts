import type { ApiKeyRecord } from '@ets/domain';
import type { Settings } from '../config/settings.js';
import { ApiKeyFile, generateRawKey, hashKey, parseKeyRecords } from './api-keys.js';

/** Where the server's key records come from: SVC_API_KEYS wins over the key file. */
export function loadKeyRecords(settings: Settings): ApiKeyRecord[] {
  if (settings.apiKeysInline !== undefined) return parseKeyRecords(settings.apiKeysInline, 'SVC_API_KEYS');
  return new ApiKeyFile(settings.apiKeysFile).read();
}

/**
 * A first start with no key configured issues one USER key (all capabilities) and returns its raw
 * value so the caller can print it once; it is not stored anywhere.
 */
export function issueFirstKeyIfNone(settings: Settings): { records: ApiKeyRecord[]; issuedRawKey?: string; callerId?: string } {
  const records = loadKeyRecords(settings);
  if (records.length > 0 || settings.apiKeysInline !== undefined || settings.authDisabled) return { records };
  const raw = generateRawKey();
  const record: ApiKeyRecord = {
    callerId: 'operator',
    keyHash: hashKey(raw),
    credentialHolderType: 'USER',
    allowedCapabilities: ['*'],
    allowedTenantIds: [],
    createdAt: new Date().toISOString(),
  };
  new ApiKeyFile(settings.apiKeysFile).write([record]);
  return { records: [record], issuedRawKey: raw, callerId: record.callerId };
}

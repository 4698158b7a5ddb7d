import type { ApiKeyRecord } from '@ets/domain';
import type { Settings } from '../config/settings.js';
import { ConfigError } from '../config/settings.js';
import { ApiKeyFile, generateRawKey, hashKey, keyRecordsStartProblem, parseKeyRecords } from './api-keys.js';

/**
 * Where the server's key records come from: SVC_API_KEYS wins over the key file. A look-alike
 * caller id, or two callers sharing a step-up key, are refused here, at start, and not when the
 * file is read: `ets keys remove` must still be able to read the file to fix it.
 */
export function loadKeyRecords(settings: Settings): ApiKeyRecord[] {
  const [records, origin] =
    settings.apiKeysInline !== undefined
      ? [parseKeyRecords(settings.apiKeysInline, 'SVC_API_KEYS'), 'SVC_API_KEYS']
      : [new ApiKeyFile(settings.apiKeysFile).read(), settings.apiKeysFile];
  const problem = keyRecordsStartProblem(records);
  if (problem) throw new ConfigError(`Invalid key records in ${origin}: ${problem}.`);
  return records;
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

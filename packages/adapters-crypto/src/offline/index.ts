export {
  verifyOffline,
  detectKind,
  OFFLINE_RECORD_KINDS,
  type OfflineRecordKind,
  type OfflineCheck,
  type OfflineReport,
} from './verify-offline.js';
export { unwrapServedRecord, type UnwrappedRecord } from './unwrap.js';

export {
  verifyOfflineWith,
  detectKind,
  OFFLINE_RECORD_KINDS,
  type OfflineRecordKind,
  type OfflineCheck,
  type OfflineReport,
  type OfflineOptions,
} from './verify-offline.js';
export { verifyOffline } from './node.js';
export { unwrapServedRecord, type UnwrappedRecord } from './unwrap.js';
export { ExportLineChecker, ExportVerifier, EXPORT_FORMAT, type CheckedLine, type ExportHeader, type ExportSummary, type LineFailure } from './export-verifier.js';

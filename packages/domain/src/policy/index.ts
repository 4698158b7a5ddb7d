/** Policy model: the document, its validation (JSON Schema + CEL type check), compilation and evaluation. */
export * from './document.js';
export {
  POLICY_DOCUMENT_SCHEMA,
  SIGNAL_NAME_PATTERN,
  RULE_ID_PATTERN,
  INTENT_PATH_PATTERN,
  RESERVED_SIGNAL_NAMES,
  schemaErrors,
} from './schema.js';
export { validatePolicyDocument, validateNewPolicyVersion, type PolicyValidationResult } from './validate.js';
export {
  compilePolicy,
  evaluatePolicy,
  checkSignalTypes,
  hasSignalType,
  InvalidPolicyError,
  NO_MATCHING_RULE_DECISION,
  NO_MATCHING_RULE_REASON,
  type CompiledPolicy,
  type CompiledRule,
  type PolicyDecision,
  type PolicyInput,
} from './evaluate.js';
export * from './policy-version.js';
export { PolicyService } from './policy-service.js';
export * from './policy-governance.js';
export { InMemoryPolicyStore } from './in-memory-policy-store.js';
export * from './impact.js';

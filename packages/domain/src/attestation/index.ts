/** The attestation profile (profile A): spec 2.9, 3, 4.2, 5.5, 6, 9.4. */
export * from './records.js';
export * from './identity.js';
export * from './ports.js';
export * from './requests.js';
export * from './runtime.js';
export * from './evaluator-identity.js';
export * from './attestation-checks.js';
export * from '../shared/fail-closed.js';
export * from './security-events.js';
export * from './attestation-service.js';
export * from './attestation-verifier.js';
export * from './overrides.js';
export * from './confirmation.js';
export * from './audit-reads.js';

export * from './records.js';
export * from './ports.js';
export * from './connectors.js';
export * from './chain.js';
export * from './transaction-request.js';
export * from './execution-service.js';
export { runStages, stage, type ExecutionContext, type ExecutionDeps, type ExecutionHooks, type ExecutionOutcome, type PolicyCatalog, type PublishedPolicy, type Stage } from './pipeline.js';
export { PRINCIPAL_NOT_PERMITTED } from './stages.js';
export * from './policy-catalog.js';

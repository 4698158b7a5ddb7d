import { EntitySchema } from 'typeorm';

/**
 * Tables of the execution pipeline (migrations 0001, 0004, 0013 and 0017). The store queries them with plain
 * parameterised SQL on its hot path; these mappings describe the same columns for the ORM.
 */
export interface ExecutionIntentRow {
  businessTransactionId: string;
  callerId: string | null;
  state: string;
  /** The signed intent, JSON exactly as signed. */
  intent: string;
  /** JSON of the IntentStatus extras (error, resolution). */
  statusDetail: string | null;
  /** JSON of the internal ReleaseContext. */
  releaseContext: string | null;
  createdAt: string;
  updatedAt: string;
  /** Until when the request that prepared it may still release it (not resolvable before); null: not in flight. */
  inFlightUntil: string | null;
}

export const ExecutionIntentEntity = new EntitySchema<ExecutionIntentRow>({
  name: 'ExecutionIntent',
  tableName: 'execution_intents',
  columns: {
    businessTransactionId: { name: 'business_transaction_id', type: 'varchar', length: 64, primary: true },
    callerId: { name: 'caller_id', type: 'varchar', length: 256, nullable: true },
    state: { name: 'state', type: 'varchar', length: 16 },
    intent: { name: 'intent', type: 'text' },
    statusDetail: { name: 'status_detail', type: 'text', nullable: true },
    releaseContext: { name: 'release_context', type: 'text', nullable: true },
    createdAt: { name: 'created_at', type: 'varchar', length: 32 },
    updatedAt: { name: 'updated_at', type: 'varchar', length: 32 },
    inFlightUntil: { name: 'in_flight_until', type: 'varchar', length: 32, nullable: true },
  },
});

export interface TransactionClaimRow {
  businessTransactionId: string;
  callerId: string;
  outcome: string;
  createdAt: string;
  /** The decision of the policy's evaluation and its input (migration 0017); null without one. */
  policyName: string | null;
  policyVersion: string | null;
  decisionAction: string | null;
  matchedRuleId: string | null;
  /** JSON of `{ signals, intent }`, what the policy decided on. */
  decisionInput: string | null;
}

export const TransactionClaimEntity = new EntitySchema<TransactionClaimRow>({
  name: 'TransactionClaim',
  tableName: 'business_transactions',
  columns: {
    businessTransactionId: { name: 'business_transaction_id', type: 'varchar', length: 64, primary: true },
    callerId: { name: 'caller_id', type: 'varchar', length: 256 },
    outcome: { name: 'outcome', type: 'varchar', length: 16 },
    createdAt: { name: 'created_at', type: 'varchar', length: 32 },
    policyName: { name: 'policy_name', type: 'varchar', length: 128, nullable: true },
    policyVersion: { name: 'policy_version', type: 'varchar', length: 64, nullable: true },
    decisionAction: { name: 'decision_action', type: 'varchar', length: 32, nullable: true },
    matchedRuleId: { name: 'matched_rule_id', type: 'varchar', length: 128, nullable: true },
    decisionInput: { name: 'decision_input', type: 'text', nullable: true },
  },
});

export interface SignedRecordRow {
  businessTransactionId: string;
  /** The signed record, JSON exactly as signed. */
  body: string;
  createdAt: string;
}

const recordColumns = {
  businessTransactionId: { name: 'business_transaction_id', type: 'varchar', length: 64, primary: true },
  body: { name: 'body', type: 'text' },
  createdAt: { name: 'created_at', type: 'varchar', length: 32 },
} as const;

export interface TrustRecordRow extends SignedRecordRow {
  /** The claim's caller (reads are scoped by it). */
  callerId: string | null;
  /** 1, 2, 3, … in the order the record joined the deployment's chain; null without executions. */
  chainPosition: string | null;
}

export const TrustRecordEntity = new EntitySchema<TrustRecordRow>({
  name: 'TrustRecord',
  tableName: 'trust_records',
  columns: {
    ...recordColumns,
    callerId: { name: 'caller_id', type: 'varchar', length: 256, nullable: true },
    chainPosition: { name: 'chain_position', type: 'bigint', nullable: true },
  },
});

export const RefusalRecordEntity = new EntitySchema<SignedRecordRow>({
  name: 'RefusalRecord',
  tableName: 'refusal_records',
  columns: recordColumns,
});

export interface ExecutionChainRow {
  id: number;
  headHash: string | null;
  /** The head's chain position (0 before the first execution). */
  headPosition: string;
  updatedAt: string;
}

export const ExecutionChainEntity = new EntitySchema<ExecutionChainRow>({
  name: 'ExecutionChain',
  tableName: 'execution_chain',
  columns: {
    id: { name: 'id', type: 'integer', primary: true },
    headHash: { name: 'head_hash', type: 'varchar', length: 64, nullable: true },
    headPosition: { name: 'head_position', type: 'bigint', default: 0 },
    updatedAt: { name: 'updated_at', type: 'varchar', length: 32 },
  },
});

export const EXECUTION_ENTITY_SCHEMAS = [
  ExecutionIntentEntity,
  TransactionClaimEntity,
  TrustRecordEntity,
  RefusalRecordEntity,
  ExecutionChainEntity,
];

import { EntitySchema } from 'typeorm';

/**
 * Tables of the execution pipeline (migrations 0001 and 0004). The store queries them with plain
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
  },
});

export interface TransactionClaimRow {
  businessTransactionId: string;
  callerId: string;
  outcome: string;
  createdAt: string;
}

export const TransactionClaimEntity = new EntitySchema<TransactionClaimRow>({
  name: 'TransactionClaim',
  tableName: 'business_transactions',
  columns: {
    businessTransactionId: { name: 'business_transaction_id', type: 'varchar', length: 64, primary: true },
    callerId: { name: 'caller_id', type: 'varchar', length: 256 },
    outcome: { name: 'outcome', type: 'varchar', length: 16 },
    createdAt: { name: 'created_at', type: 'varchar', length: 32 },
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

export const TrustRecordEntity = new EntitySchema<SignedRecordRow>({
  name: 'TrustRecord',
  tableName: 'trust_records',
  columns: recordColumns,
});

export const RefusalRecordEntity = new EntitySchema<SignedRecordRow>({
  name: 'RefusalRecord',
  tableName: 'refusal_records',
  columns: recordColumns,
});

export interface ExecutionChainRow {
  id: number;
  headHash: string | null;
  updatedAt: string;
}

export const ExecutionChainEntity = new EntitySchema<ExecutionChainRow>({
  name: 'ExecutionChain',
  tableName: 'execution_chain',
  columns: {
    id: { name: 'id', type: 'integer', primary: true },
    headHash: { name: 'head_hash', type: 'varchar', length: 64, nullable: true },
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

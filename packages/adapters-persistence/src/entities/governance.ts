import { EntitySchema } from 'typeorm';

export interface PendingChangeRow {
  id: string;
  kind: string;
  subject: string | null;
  status: string;
  payload: string;
  proposer: string;
  proposerStepUpKey: string | null;
  reason: string | null;
  createdAt: string;
  decider: string | null;
  decidedAt: string | null;
  rejectionReason: string | null;
  appliedAt: string | null;
}

export const PendingChangeEntity = new EntitySchema<PendingChangeRow>({
  name: 'PendingChange',
  tableName: 'pending_changes',
  columns: {
    id: { name: 'id', type: 'varchar', length: 64, primary: true },
    kind: { name: 'kind', type: 'varchar', length: 64 },
    subject: { name: 'subject', type: 'varchar', length: 256, nullable: true },
    status: { name: 'status', type: 'varchar', length: 32 },
    payload: { name: 'payload', type: 'text' },
    proposer: { name: 'proposer', type: 'varchar', length: 256 },
    proposerStepUpKey: { name: 'proposer_step_up_key', type: 'varchar', length: 64, nullable: true },
    reason: { name: 'reason', type: 'text', nullable: true },
    createdAt: { name: 'created_at', type: 'varchar', length: 32 },
    decider: { name: 'decider', type: 'varchar', length: 256, nullable: true },
    decidedAt: { name: 'decided_at', type: 'varchar', length: 32, nullable: true },
    rejectionReason: { name: 'rejection_reason', type: 'text', nullable: true },
    appliedAt: { name: 'applied_at', type: 'varchar', length: 32, nullable: true },
  },
});

export interface StepUpNonceRow {
  nonce: string;
  callerId: string;
  changeId: string;
  usedAt: string;
}

export const StepUpNonceEntity = new EntitySchema<StepUpNonceRow>({
  name: 'StepUpNonce',
  tableName: 'step_up_nonces',
  columns: {
    nonce: { name: 'nonce', type: 'varchar', length: 512, primary: true },
    callerId: { name: 'caller_id', type: 'varchar', length: 256 },
    changeId: { name: 'change_id', type: 'varchar', length: 64 },
    usedAt: { name: 'used_at', type: 'varchar', length: 32 },
  },
});

export interface PolicyVersionRow {
  seq?: number;
  name: string;
  version: string;
  content: string;
  contentHash: string;
  changeId: string;
  proposer: string;
  approvedBy: string;
  approvedAt: string;
}

export const PolicyVersionEntity = new EntitySchema<PolicyVersionRow>({
  name: 'PolicyVersion',
  tableName: 'policy_versions',
  columns: {
    seq: { name: 'seq', type: 'integer', primary: true, generated: 'increment' },
    name: { name: 'name', type: 'varchar', length: 128 },
    version: { name: 'version', type: 'varchar', length: 64 },
    content: { name: 'content', type: 'text' },
    contentHash: { name: 'content_hash', type: 'varchar', length: 64 },
    changeId: { name: 'change_id', type: 'varchar', length: 64 },
    proposer: { name: 'proposer', type: 'varchar', length: 256 },
    approvedBy: { name: 'approved_by', type: 'varchar', length: 256 },
    approvedAt: { name: 'approved_at', type: 'varchar', length: 32 },
  },
});

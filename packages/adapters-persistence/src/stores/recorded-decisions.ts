import type { DataSource } from 'typeorm';
import type { DecidedAction, PolicyInput, RecordedDecision, RecordedDecisions } from '@ets/domain';
import { SqliteStatements } from './sqlite-writer.js';
import { toPg } from './sql.js';

/**
 * Rows read per query: a decision's input is at most a request body (SVC_BODY_LIMIT), so a batch
 * bounds what one preview holds in memory.
 */
const BATCH = 50;

interface DecisionRow {
  business_transaction_id: string;
  created_at: string;
  policy_name: string;
  policy_version: string;
  decision_action: DecidedAction;
  matched_rule_id: string | null;
  decision_input: string;
}

const SELECT = `SELECT business_transaction_id, created_at, policy_name, policy_version, decision_action, matched_rule_id, decision_input
  FROM business_transactions WHERE policy_name = ? AND decision_input IS NOT NULL`;
/** Keyset paging, newest first, through idx_business_transactions_policy_decisions (0017). */
const FIRST = `${SELECT} ORDER BY created_at DESC, business_transaction_id DESC LIMIT ?`;
const AFTER = `${SELECT} AND (created_at < ? OR (created_at = ? AND business_transaction_id < ?)) ORDER BY created_at DESC, business_transaction_id DESC LIMIT ?`;

/** The decisions kept with the claims (migration 0017), for the impact preview. */
export class TypeOrmRecordedDecisions implements RecordedDecisions {
  private readonly pg: boolean;

  constructor(private readonly ds: DataSource) {
    this.pg = ds.options.type === 'postgres';
  }

  async *latest(policyName: string, limit: number): AsyncGenerator<RecordedDecision> {
    let left = limit;
    let last: DecisionRow | undefined;
    while (left > 0) {
      const n = Math.min(BATCH, left);
      const rows = last
        ? await this.read(AFTER, [policyName, last.created_at, last.created_at, last.business_transaction_id, n])
        : await this.read(FIRST, [policyName, n]);
      for (const row of rows) yield toDecision(row);
      if (rows.length < n) return;
      left -= rows.length;
      last = rows.at(-1);
    }
  }

  private async read(sql: string, params: unknown[]): Promise<DecisionRow[]> {
    if (this.pg) return (await this.ds.query(toPg(sql), params)) as DecisionRow[];
    return SqliteStatements.of(this.ds).runSync(sql, params).records as DecisionRow[];
  }
}

function toDecision(r: DecisionRow): RecordedDecision {
  return {
    businessTransactionId: r.business_transaction_id,
    decidedAt: r.created_at,
    policyName: r.policy_name,
    policyVersion: r.policy_version,
    action: r.decision_action,
    matchedRuleId: r.matched_rule_id,
    input: JSON.parse(r.decision_input) as PolicyInput,
  };
}

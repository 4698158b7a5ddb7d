import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Records read per statement while existing records get their positions (few: a record may be
 * megabytes), and positions written per statement.
 */
const READ_BATCH = 25;
const WRITE_BATCH = 200;

/**
 * Issue 9, items 5-8 and 12:
 * - `execution_intents.in_flight_until`: until when the request that prepared a PREPARED intent
 *   may still release it; a resolution is refused before (null: not in flight, which is also what
 *   intents stored before this migration have).
 * - `trust_records.chain_position` (1, 2, 3, … for records with executions, in the order they
 *   joined the deployment's chain; null for records without executions) and
 *   `execution_chain.head_position` (the head's position), assigned under the chain lock at
 *   finalize; `GET /trust-records` lists by them.
 * - `trust_records.caller_id` (the claim's caller): reads are scoped to a caller, and a caller's
 *   records are listed in chain order through an index.
 * - Indexes for every scoped list, in its order.
 *
 * Existing records get their positions by following the chain from the head backwards
 * (`previousChainHash` of a record's first execution names the `chainHash` of the previous
 * record's last one). A record with executions that the walk does not reach (only possible after
 * a fork or a deleted record) gets no position: it is listed with the records without executions,
 * and an auditor walking the chain finds the gap where the walk from the genesis stops.
 */
export class ReadScopeChainOrderInFlight1763684400000 implements MigrationInterface {
  name = 'ReadScopeChainOrderInFlight1763684400000';

  async up(q: QueryRunner): Promise<void> {
    // Plain ALTER TABLE (valid on both databases): SQLite adds a column without copying the table.
    await q.query('ALTER TABLE execution_intents ADD COLUMN in_flight_until varchar(32) NULL');
    await q.query('ALTER TABLE trust_records ADD COLUMN caller_id varchar(256) NULL');
    await q.query('ALTER TABLE trust_records ADD COLUMN chain_position bigint NULL');
    await q.query('ALTER TABLE execution_chain ADD COLUMN head_position bigint NOT NULL DEFAULT 0');

    await q.query(
      `UPDATE trust_records SET caller_id = (SELECT b.caller_id FROM business_transactions b
         WHERE b.business_transaction_id = trust_records.business_transaction_id)`,
    );
    const positioned = await positionExistingRecords(q);
    await q.query(`UPDATE execution_chain SET head_position = ${positioned} WHERE id = 1`);

    // GET /trust-records: the chain by position (unique: two records never share a place, a fork
    // would be refused by the database too), then the records without executions by creation.
    await q.query('DROP INDEX idx_trust_records_created');
    await q.query('CREATE UNIQUE INDEX uq_trust_records_chain_position ON trust_records (chain_position) WHERE chain_position IS NOT NULL');
    await q.query('CREATE INDEX idx_trust_records_unchained ON trust_records (created_at, business_transaction_id) WHERE chain_position IS NULL');
    await q.query('CREATE INDEX idx_trust_records_caller_chain ON trust_records (caller_id, chain_position) WHERE chain_position IS NOT NULL');
    await q.query(
      'CREATE INDEX idx_trust_records_caller_unchained ON trust_records (caller_id, created_at, business_transaction_id) WHERE chain_position IS NULL',
    );
    // GET /transactions of one caller, newest first.
    await q.query('CREATE INDEX idx_business_transactions_caller ON business_transactions (caller_id, created_at, business_transaction_id)');
    // GET /execution-intents by state (and of one caller), oldest first.
    await q.query('DROP INDEX idx_execution_intents_state');
    await q.query('CREATE INDEX idx_execution_intents_state ON execution_intents (state, created_at, business_transaction_id)');
    await q.query('CREATE INDEX idx_execution_intents_caller ON execution_intents (caller_id, state, created_at, business_transaction_id)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX idx_execution_intents_caller');
    await q.query('DROP INDEX idx_execution_intents_state');
    await q.query('CREATE INDEX idx_execution_intents_state ON execution_intents (state)');
    await q.query('DROP INDEX idx_business_transactions_caller');
    await q.query('DROP INDEX idx_trust_records_caller_unchained');
    await q.query('DROP INDEX idx_trust_records_caller_chain');
    await q.query('DROP INDEX idx_trust_records_unchained');
    await q.query('DROP INDEX uq_trust_records_chain_position');
    await q.query('CREATE INDEX idx_trust_records_created ON trust_records (created_at, business_transaction_id)');
    await q.query('ALTER TABLE execution_chain DROP COLUMN head_position');
    await q.query('ALTER TABLE trust_records DROP COLUMN chain_position');
    await q.query('ALTER TABLE trust_records DROP COLUMN caller_id');
    await q.query('ALTER TABLE execution_intents DROP COLUMN in_flight_until');
  }
}

/** The links of one record: where its executions join the chain, and the hash it leaves as head. */
interface Link {
  id: string;
  previous: string | null;
}

/**
 * Walks the chain from the head back to its start and numbers the records from the start (1, 2,
 * 3, …). Returns how many got a position.
 */
async function positionExistingRecords(q: QueryRunner): Promise<number> {
  const pg = q.connection.options.type === 'postgres';
  const p = (n: number) => (pg ? `$${n}` : '?');
  const byHead = new Map<string, Link>();
  for (let after = ''; ; ) {
    const rows = (await q.query(
      `SELECT business_transaction_id, body FROM trust_records WHERE business_transaction_id > ${p(1)} ORDER BY business_transaction_id LIMIT ${READ_BATCH}`,
      [after],
    )) as { business_transaction_id: string; body: string }[];
    if (rows.length === 0) break;
    for (const row of rows) {
      const link = linkOf(row.business_transaction_id, row.body);
      if (link) byHead.set(link.head, link);
    }
    after = rows.at(-1)!.business_transaction_id;
  }

  const [chain] = (await q.query('SELECT head_hash FROM execution_chain WHERE id = 1')) as { head_hash: string | null }[];
  const newestFirst: string[] = [];
  const seen = new Set<string>();
  for (let hash = chain?.head_hash ?? null; hash !== null; ) {
    const link = byHead.get(hash);
    if (!link || seen.has(link.id)) break;
    seen.add(link.id);
    newestFirst.push(link.id);
    hash = link.previous;
  }
  const ids = newestFirst.reverse();
  for (let i = 0; i < ids.length; i += WRITE_BATCH) {
    const batch = ids.slice(i, i + WRITE_BATCH);
    const params: unknown[] = [];
    const cases = batch.map((id, k) => {
      params.push(id, i + k + 1);
      return `WHEN ${p(params.length - 1)} THEN CAST(${p(params.length)} AS bigint)`;
    });
    const list = batch.map((id) => (params.push(id), p(params.length)));
    await q.query(`UPDATE trust_records SET chain_position = CASE business_transaction_id ${cases.join(' ')} END WHERE business_transaction_id IN (${list.join(', ')})`, params);
  }
  return ids.length;
}

/** The chained executions of a stored record: the first one's previousChainHash, the last one's chainHash. */
function linkOf(id: string, body: string): (Link & { head: string }) | undefined {
  let record: unknown;
  try {
    record = JSON.parse(body);
  } catch {
    return undefined;
  }
  const executions = (record as { executions?: unknown }).executions;
  if (!Array.isArray(executions)) return undefined;
  const chained = executions.filter((e): e is { chainHash: string; previousChainHash?: unknown } => typeof (e as { chainHash?: unknown })?.chainHash === 'string');
  if (chained.length === 0) return undefined;
  const previous = chained[0]!.previousChainHash;
  return { id, previous: typeof previous === 'string' ? previous : null, head: chained.at(-1)!.chainHash };
}

import { scopedCaller, type ReadScope } from '@ets/domain';

/** A condition of a WHERE clause with its `?` parameters. */
export type Condition = readonly [sql: string, ...params: unknown[]];

/**
 * The condition a read scope adds (CONTRACT "Requests, reads and lists"): none for every caller,
 * else the row's caller. `column` holds the caller id on the row itself; for a table without one,
 * `claimedBy(table)` asks the transaction's claim.
 */
export function inScope(scope: ReadScope, column: string): Condition | undefined {
  const callerId = scopedCaller(scope);
  return callerId === undefined ? undefined : [`${column} = ?`, callerId];
}

/** An optional filter: the condition with its value, or none when the value is undefined. */
export const given = (sql: string, value: unknown): Condition | undefined => (value === undefined ? undefined : [sql, value]);

/** The claim of the row's transaction (`business_transactions`) names the caller: `inScope(scope, claimedBy('receipts'))`. */
export const claimedBy = (table: string): string =>
  `(SELECT b.caller_id FROM business_transactions b WHERE b.business_transaction_id = ${table}.business_transaction_id)`;

/** ` WHERE a AND b …` of the conditions given (undefined ones left out), and their parameters in order. */
export function where(...conditions: (Condition | undefined)[]): { sql: string; params: unknown[] } {
  const present = conditions.filter((c): c is Condition => c !== undefined);
  return {
    sql: present.length === 0 ? '' : ` WHERE ${present.map((c) => c[0]).join(' AND ')}`,
    params: present.flatMap((c) => c.slice(1)),
  };
}

/** `?` placeholders to PostgreSQL's `$n`. */
export const toPg = (sql: string): string => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

/** `(?, ?, …)` for an IN list of `n` values. */
export const placeholders = (n: number): string => `(${Array.from({ length: n }, () => '?').join(', ')})`;

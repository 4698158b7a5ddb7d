import type { DataSource } from 'typeorm';

/**
 * Every table a request can write to, except the authentication audit (written before any body is
 * read): what a refused request must leave as it was.
 */
export const REQUEST_TABLES = [
  'business_transactions',
  'execution_intents',
  'trust_records',
  'refusal_records',
  'execution_chain',
  'pending_changes',
  'step_up_nonces',
  'policy_versions',
  'handbook_leads',
  'verifications',
  'receipts',
  'console_sessions',
] as const;

/** The number of rows of each table, to compare before and after. */
export async function rowCounts(ds: DataSource, tables: readonly string[] = REQUEST_TABLES): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = Number(((await ds.query(`SELECT COUNT(*) AS n FROM ${t}`)) as { n: string | number }[])[0]!.n);
  return out;
}

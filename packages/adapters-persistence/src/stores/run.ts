/**
 * How a store runs one statement inside a transaction it was handed. A module of its own, below the
 * SQLite writer and the transparency log's append: both use it, and the writer uses the append.
 */

/** What a statement gave: the rows a read returned, the rows a write changed. */
export interface RunResult {
  records: unknown[];
  affected?: number;
}
export type Run = (sql: string, params: unknown[]) => Promise<RunResult>;

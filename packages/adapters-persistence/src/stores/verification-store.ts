import type { DataSource } from 'typeorm';
import type { ReceiptStore, SignedReceipt, SignedVerification, VerificationStore } from '@ets/domain';
import { execute, writeSerially } from './serial-writes.js';

/** `?` placeholders to PostgreSQL's `$n`. */
const toPg = (sql: string): string => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

/**
 * An append-only table of signed objects of one transaction each (`verifications`, `receipts`,
 * migration 0005). The body is `JSON.stringify` of the signed object and comes back through
 * `JSON.parse`, so what was signed is returned unchanged.
 */
class SignedLog<T> {
  private readonly insertSql: string;
  private readonly latestSql: string;

  constructor(
    private readonly ds: DataSource,
    table: 'verifications' | 'receipts',
  ) {
    const pg = ds.options.type === 'postgres';
    const insert = `INSERT INTO ${table} (id, business_transaction_id, created_at, body) VALUES (?, ?, ?, ?)`;
    // Newest first; rows of the same instant in insertion order (seq), so the answer is deterministic.
    const latest = `SELECT body FROM ${table} WHERE business_transaction_id = ? ORDER BY created_at DESC, seq DESC LIMIT 1`;
    this.insertSql = pg ? toPg(insert) : insert;
    this.latestSql = pg ? toPg(latest) : latest;
  }

  async append(id: string, businessTransactionId: string, createdAt: string, signed: T): Promise<void> {
    const params = [id, businessTransactionId, createdAt, JSON.stringify(signed)];
    // SQLite: through the DataSource's single writer (see writeSerially).
    await writeSerially(this.ds, () => execute(this.ds, this.insertSql, params));
  }

  async latest(businessTransactionId: string): Promise<T | undefined> {
    const [row] = (await this.ds.query(this.latestSql, [businessTransactionId])) as { body: string }[];
    return row ? (JSON.parse(row.body) as T) : undefined;
  }
}

export class TypeOrmVerificationStore implements VerificationStore {
  private readonly log: SignedLog<SignedVerification>;

  constructor(ds: DataSource) {
    this.log = new SignedLog(ds, 'verifications');
  }

  append(v: SignedVerification): Promise<void> {
    return this.log.append(v.verificationId, v.businessTransactionId, v.verifiedAt, v);
  }

  latest(businessTransactionId: string): Promise<SignedVerification | undefined> {
    return this.log.latest(businessTransactionId);
  }
}

export class TypeOrmReceiptStore implements ReceiptStore {
  private readonly log: SignedLog<SignedReceipt>;

  constructor(ds: DataSource) {
    this.log = new SignedLog(ds, 'receipts');
  }

  append(r: SignedReceipt): Promise<void> {
    return this.log.append(r.receiptId, r.businessTransactionId, r.issuedAt, r);
  }

  latest(businessTransactionId: string): Promise<SignedReceipt | undefined> {
    return this.log.latest(businessTransactionId);
  }
}

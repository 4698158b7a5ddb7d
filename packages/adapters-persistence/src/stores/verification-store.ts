import type { DataSource } from 'typeorm';
import type { ReadScope, ReceiptStore, SignedReceipt, SignedVerification, VerificationStore } from '@ets/domain';
import { appendToLog } from '../transparency/log-in-transaction.js';
import { storeTransaction } from './store-transaction.js';
import { claimedBy, inScope, toPg, where } from './sql.js';

/**
 * An append-only table of signed objects of one transaction each (`verifications`, `receipts`,
 * migration 0005). The body is `JSON.stringify` of the signed object and comes back through
 * `JSON.parse`, so what was signed is returned unchanged. Each row is a leaf of the transparency
 * log, appended in its transaction.
 */
class SignedLog<T> {
  private readonly insertSql: string;
  private readonly pg: boolean;

  constructor(
    private readonly ds: DataSource,
    private readonly table: 'verifications' | 'receipts',
    private readonly kind: 'verification' | 'receipt',
  ) {
    this.pg = ds.options.type === 'postgres';
    const insert = `INSERT INTO ${table} (id, business_transaction_id, created_at, body) VALUES (?, ?, ?, ?)`;
    this.insertSql = this.pg ? toPg(insert) : insert;
  }

  async append(id: string, businessTransactionId: string, createdAt: string, signed: T): Promise<void> {
    const body = JSON.stringify(signed);
    await storeTransaction(this.ds, async (run) => {
      await run(this.insertSql, [id, businessTransactionId, createdAt, body]);
      appendToLog(run, [{ kind: this.kind, id, body }]);
    });
  }

  /** Within `scope`: the transaction's claim must name the scope's caller. */
  async latest(businessTransactionId: string, scope: ReadScope): Promise<T | undefined> {
    const w = where(['business_transaction_id = ?', businessTransactionId], inScope(scope, claimedBy(this.table)));
    // Newest first; rows of the same instant in insertion order (seq), so the answer is deterministic.
    const sql = `SELECT body FROM ${this.table}${w.sql} ORDER BY created_at DESC, seq DESC LIMIT 1`;
    const [row] = (await this.ds.query(this.pg ? toPg(sql) : sql, w.params)) as { body: string }[];
    return row ? (JSON.parse(row.body) as T) : undefined;
  }
}

export class TypeOrmVerificationStore implements VerificationStore {
  private readonly log: SignedLog<SignedVerification>;

  constructor(ds: DataSource) {
    this.log = new SignedLog(ds, 'verifications', 'verification');
  }

  append(v: SignedVerification): Promise<void> {
    return this.log.append(v.verificationId, v.businessTransactionId, v.verifiedAt, v);
  }

  latest(businessTransactionId: string, scope: ReadScope): Promise<SignedVerification | undefined> {
    return this.log.latest(businessTransactionId, scope);
  }
}

export class TypeOrmReceiptStore implements ReceiptStore {
  private readonly log: SignedLog<SignedReceipt>;

  constructor(ds: DataSource) {
    this.log = new SignedLog(ds, 'receipts', 'receipt');
  }

  append(r: SignedReceipt): Promise<void> {
    return this.log.append(r.receiptId, r.businessTransactionId, r.issuedAt, r);
  }

  latest(businessTransactionId: string, scope: ReadScope): Promise<SignedReceipt | undefined> {
    return this.log.latest(businessTransactionId, scope);
  }
}

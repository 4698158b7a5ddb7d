import { createHash } from 'node:crypto';
import { canonicalize, verifyDetached, verifyRecord } from '@ets/adapters-crypto';

type Execution = Record<string, unknown> & { previousChainHash?: string | null; chainHash?: string; chainSignature?: string };
export type ListedRecord = Record<string, unknown> & { businessTransactionId: string; keyId: string; executions: Execution[] };

const H = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * The walk an auditor makes over `GET /trust-records` (OpenAPI `listTrustRecords`, guide "Hashes
 * and the execution chain"), with only the JWKS: page after page, every record's signature, every
 * execution's link to the one before, its recomputed chainHash and its chainSignature; after the
 * first record without executions, no record has any. Throws at the first break, naming it.
 * Returns the ids of the chain, in order, and of the records after it.
 */
export async function walkChain(
  fetchPage: (page: number, pageSize: number) => Promise<{ items: ListedRecord[]; total: number }>,
  jwks: unknown,
  pageSize = 100,
): Promise<{ chained: string[]; unchained: string[] }> {
  const chained: string[] = [];
  const unchained: string[] = [];
  let previous: string | null = null;
  for (let page = 1; ; page++) {
    const { items } = await fetchPage(page, pageSize);
    for (const record of items) {
      const where = `page ${page}, record ${record.businessTransactionId}`;
      if (!verifyRecord(record, jwks as never).valid) throw new Error(`${where}: its signature does not verify`);
      if (record.executions.length === 0) {
        unchained.push(record.businessTransactionId);
        continue;
      }
      if (unchained.length > 0) throw new Error(`${where}: a chained record after the chain ended`);
      for (const execution of record.executions) {
        const { previousChainHash, chainHash, chainSignature, ...entry } = execution;
        if (previousChainHash !== previous) throw new Error(`${where}: previousChainHash ${String(previousChainHash)} does not link to ${String(previous)}`);
        const digest = H(canonicalize({ businessTransactionId: record.businessTransactionId, execution: entry }));
        if (H(`${previousChainHash ?? ''}:${digest}`) !== chainHash) throw new Error(`${where}: chainHash does not recompute`);
        if (!verifyDetached(chainHash, { keyId: record.keyId, signature: chainSignature! }, jwks as never).valid) throw new Error(`${where}: chainSignature does not verify`);
        previous = chainHash;
      }
      chained.push(record.businessTransactionId);
    }
    if (items.length < pageSize) return { chained, unchained };
  }
}

/**
 * The auditor: takes the service's public keys once, then checks any record it was handed, with
 * no server, no database and no trust in whoever passed the record on.
 */
import { createClient, verifyRecord, type JwksLike, type RecordReport } from '@ets/client';

export async function fetchPublicKeys(baseUrl: string): Promise<JwksLike> {
  const { data, error } = await createClient({ baseUrl }).GET('/.well-known/jwks.json'); // public: no key
  if (error) throw new Error('the service did not serve its JWKS');
  return data;
}

/** Offline from here on: every check of `ets verify` (signatures, hashes, execution chain, transparency proofs). */
export function audit(records: unknown[], jwks: JwksLike): RecordReport[] {
  return records.map((record) => verifyRecord(record, jwks));
}

/**
 * Verification in the browser with @ets/client's offline verifier (the checks of `ets verify`)
 * against the service's published keys, and the transparency log's proofs checked here too: the
 * page trusts the service for nothing but the bytes it checks.
 */
import { logLeafOf, verifyLogCheckpoint, verifyLogInclusion, verifyRecord, type JwksLike } from '@ets/client';
import { call, getJson, getText } from './api';

export interface CheckLine {
  name: string;
  ok: boolean;
  detail?: string;
}

let jwks: Promise<JwksLike> | undefined;
/** The JWKS, once per page load (keys that signed anything stay published). */
export const publishedKeys = (): Promise<JwksLike> => (jwks ??= getJson<JwksLike>('/.well-known/jwks.json').catch((e) => ((jwks = undefined), Promise.reject(e))));

/** Every offline check of a record, then its inclusion in the log under a signed checkpoint. */
export async function verifyInBrowser(record: unknown): Promise<{ kind: string; valid: boolean; checks: CheckLine[] }> {
  const keys = await publishedKeys();
  const report = verifyRecord(record, keys);
  const checks: CheckLine[] = report.checks.map((c) => ({ name: c.name, ok: c.ok, detail: c.detail }));
  const inclusion = await inclusionCheck(record, keys);
  checks.push(inclusion);
  return { kind: report.kind, valid: report.valid && inclusion.ok, checks };
}

/** The record's leaf is in the tree of the latest signed checkpoint (RFC 9162 inclusion proof). */
async function inclusionCheck(record: unknown, keys: JwksLike, retries = 3): Promise<CheckLine> {
  const name = 'transparency log inclusion';
  try {
    const note = await getText('/log/checkpoint');
    const checkpoint = verifyLogCheckpoint(note, keys);
    if (!checkpoint.ok) return { name, ok: false, detail: `the checkpoint does not verify: ${checkpoint.errors.join('; ')}` };
    const size = checkpoint.checkpoint.treeSize;
    const leaf = logLeafOf(record);
    const proof = size > 0 ? await call<Record<string, unknown>>('GET', `/log/proof/inclusion?leaf=${leaf}&size=${size}`) : { status: 404, body: {} };
    if (proof.status === 404) {
      // A record signed a moment ago is in the next checkpoint (published every second).
      if (retries > 0) return new Promise((resolve) => setTimeout(() => resolve(inclusionCheck(record, keys, retries - 1)), 1200));
      return { name, ok: false, detail: `not in the log's tree of ${size} leaves: this exact record was never logged` };
    }
    if (proof.status !== 200) return { name, ok: false, detail: `the service answered ${proof.status}` };
    const checked = verifyLogInclusion(leaf, { ...proof.body, checkpoint: note }, keys);
    return checked.ok
      ? { name, ok: true, detail: `leaf ${String(proof.body.leafIndex)} of ${size}, checkpoint signed by ${checked.checkpoint.signedBy.join(', ')}` }
      : { name, ok: false, detail: checked.errors.join('; ') };
  } catch (e) {
    return { name, ok: false, detail: (e as Error).message };
  }
}

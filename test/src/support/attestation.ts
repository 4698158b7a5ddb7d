import request from 'supertest';
import { toOpenApiPath, buildOpenApiDocument, type HttpApp, type OpenApiDocument, type OpenApiProfile } from '@ets/adapters-http';
import type { PolicyDocument } from '@ets/domain';
import type { DataSource } from 'typeorm';

/** Profile A's strict policy: no default, so an amount of 0 or less matches no rule; a rule reads `amount` unguarded. */
export const STRICT_POLICY: PolicyDocument = {
  name: 'attest-strict',
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
  rules: [
    { id: 'sanctioned', when: "has(signals.country) && signals.country == 'KP'", action: 'reject', reason: 'Country is sanctioned' },
    { id: 'large', when: 'signals.amount > 10000', action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'signals.amount > 0', action: 'approve', reason: 'Within limits' },
  ],
};

/**
 * Every row of every table that profile A's audit or replay guard writes to, counted: its own
 * tables, the signed audit events (caller authentications), and the transparency log every signed
 * record is a leaf of (leaves, nodes, the tree size, checkpoints). Checkpoints are signed on a
 * schedule of their own, about a second after the tree grew, so the count waits (at most 5 s)
 * until the latest one covers the tree: it never catches one in flight.
 */
export async function attestationTableCounts(ds: DataSource): Promise<Record<string, number>> {
  const tables = [
    'attestation_replay_guard',
    'attestation_decisions',
    'attestation_overrides',
    'attestation_confirmations',
    'attestation_confirmation_proofs',
    'attestation_verifications',
    'attestation_security_events',
    'attestation_api_calls',
    'runtime_manifests',
    'audit_events',
    'transparency_log_leaves',
    'transparency_log_nodes',
    'transparency_log_checkpoints',
  ];
  const one = async (sql: string): Promise<number> => Number(((await ds.query(sql)) as { n: string | number | null }[])[0]?.n ?? 0);
  const treeSize = () => one('SELECT tree_size AS n FROM transparency_log_head WHERE id = 1');
  for (const until = Date.now() + 5000; Date.now() < until; ) {
    if ((await one('SELECT MAX(tree_size) AS n FROM transparency_log_checkpoints')) === (await treeSize())) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const out: Record<string, number> = {};
  for (const t of tables) out[t] = await one(`SELECT COUNT(*) AS n FROM ${t}`);
  out['transparency_log_head.tree_size'] = await treeSize();
  return out;
}

/** The names of an operation's `in: query` parameters, `$ref`s to `components.parameters` resolved. */
export function documentedQuery(doc: OpenApiDocument, op: { parameters?: unknown[] }): string[] {
  return (op.parameters ?? [])
    .map((p) => {
      const ref = (p as { $ref?: string }).$ref;
      return (ref ? doc.components?.parameters?.[ref.replace('#/components/parameters/', '')] : p) as { name: string; in: string };
    })
    .filter((p) => p.in === 'query')
    .map((p) => p.name)
    .sort();
}

/**
 * The OpenAPI document of `profile` describes exactly the mounted routes, keyed ones as keyed and
 * public ones as public, each with the query parameters the route declares it knows (any other is
 * refused with 400), no more and no fewer.
 */
export function expectRoutesDocumented(httpApp: HttpApp, profile: OpenApiProfile, expect: (v: unknown) => { toEqual(x: unknown): void }): void {
  const doc = buildOpenApiDocument(profile);
  const mounted = httpApp.routes.map((r) => `${r.method.toUpperCase()} ${toOpenApiPath(r.path)}`).sort();
  const documented = Object.entries(doc.paths)
    .flatMap(([p, item]) => Object.keys(item).filter((m) => ['get', 'post', 'put', 'delete', 'patch'].includes(m)).map((m) => `${m.toUpperCase()} ${p}`))
    .sort();
  expect(documented).toEqual(mounted);
  const operationIds = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => (op as { operationId?: string }).operationId).filter((id) => id !== undefined));
  expect(new Set(operationIds).size).toEqual(operationIds.length);
  for (const r of httpApp.routes) {
    const op = doc.paths[toOpenApiPath(r.path)]![r.method]! as { security?: unknown[]; operationId?: string; parameters?: unknown[]; 'x-profiles'?: unknown };
    const isPublic = Array.isArray(op.security) && op.security.length === 0;
    expect(`${r.method} ${r.path} public=${isPublic} x-profiles=${op['x-profiles'] !== undefined}`).toEqual(`${r.method} ${r.path} public=${r.auth === 'none'} x-profiles=false`);
    expect(`${r.method} ${r.path} query: ${documentedQuery(doc, op).join(',')}`).toEqual(`${r.method} ${r.path} query: ${[...(r.query ?? [])].sort().join(',')}`);
  }
}

export const jwksOf = async (url: string): Promise<{ keys: Record<string, unknown>[] }> => (await request(url).get('/.well-known/jwks.json')).body;

/** Lets a batch of queued API calls be written (the store flushes at most 500 ms after the first). */
export const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 800));

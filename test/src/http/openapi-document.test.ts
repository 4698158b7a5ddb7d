import { afterAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { parse as parseYaml } from 'yaml';
import { buildOpenApiDocument, HTTP_METHODS, OPENAPI, OPERATOR_GUIDE_MARKDOWN, openApiYaml, renderGuide, type OpenApiOperation } from '@ets/adapters-http';
import { NAME_RULES, silentLogger } from '@ets/domain';
import { loadSettings, startServer } from '@ets/server';
import { OpenApiResponseValidator, REPO_ROOT, takeResponseProblems } from '@ets/test-support';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const operations = (): [string, string, OpenApiOperation][] =>
  Object.entries(OPENAPI.paths).flatMap(([p, item]) => HTTP_METHODS.filter((m) => item[m]).map((m): [string, string, OpenApiOperation] => [p, m, item[m]!]));

describe('the OpenAPI document', () => {
  it('is served as YAML that parses back to the same document, for every profile', () => {
    for (const profile of ['transaction', 'attestation', 'attestation-simple'] as const) {
      const doc = buildOpenApiDocument(profile);
      expect(parseYaml(openApiYaml(doc), { uniqueKeys: true })).toEqual(JSON.parse(JSON.stringify(doc)));
    }
  });

  it('documents each name, version and id pattern people read exactly as the domain checks it', () => {
    const schemas = OPENAPI.components!.schemas as Record<string, { pattern?: string; maxLength?: number }>;
    const documented = { policyName: 'PolicyName', policyVersion: 'PolicyVersion', capability: 'Capability', sourceName: 'SourceName', callerId: 'CallerId', changeId: 'ChangeId' } as const;
    for (const [kind, schema] of Object.entries(documented)) {
      expect({ kind, pattern: schemas[schema]?.pattern }).toEqual({ kind, pattern: NAME_RULES[kind as keyof typeof documented].pattern });
    }
    // Every documented pattern holds visible ASCII only.
    for (const [kind, r] of Object.entries(NAME_RULES)) {
      const re = new RegExp(r.pattern);
      for (const ch of [' ', '\t', '\u00a0', '\u200b', '\ufeff', '\u0430', '\u007f']) expect({ kind, ch, matches: re.test(`a${ch}b`) || re.test(ch) }).toEqual({ kind, ch, matches: false });
    }
  });

  it('has a unique operationId, a summary and documented errors on every operation', () => {
    const ids = operations().map(([, , op]) => op.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z0-9]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [p, m, op] of operations()) {
      const where = `${m.toUpperCase()} ${p}`;
      expect(`${where}: ${typeof op.summary}`).toBe(`${where}: string`);
      const statuses = Object.keys(op.responses ?? {});
      expect(statuses).toEqual(expect.arrayContaining(['429', '500']));
      const keyed = !(Array.isArray(op.security) && op.security.length === 0);
      if (keyed) expect(statuses).toEqual(expect.arrayContaining(['401', '503']));
      if (op.requestBody) expect(statuses).toEqual(expect.arrayContaining(['400', '413', '415']));
    }
  });

  it('is not pinned to one address, and carries the hash and chain formulas a verifier needs', () => {
    expect(OPENAPI.servers).toEqual([expect.objectContaining({ url: '/' })]);
    const text = OPENAPI.tags!.find((t) => t.name === 'Verification')!.description!;
    for (const formula of ['`chainHash` = `H(UTF-8 of "<previousChainHash, or empty for the first>:<digest>")`', '`digest` = `H(C({businessTransactionId, execution}))`', 'RFC 8785', 'pqSignature']) {
      expect(text).toContain(formula);
    }
  });
});

const PROFILES = ['transaction', 'attestation', 'attestation-simple'] as const;
const FRAGMENTS = path.join(REPO_ROOT, 'packages/adapters-http/assets/openapi');
/** What a reader of the served document cannot follow: the interface spec, the contract, files beside the repository. */
const OUTSIDE_REFERENCE = /\bspec(?:ification)?(?:'s|\s+\d)|\bthe spec\b|\bCONTRACT\b|\.\.\/shared|service-interface|\bREADME\b/i;

describe('each profile\'s document, as a reference people read', () => {
  it.each(PROFILES)('%s: short summaries with a description below, described tags, a contact and a licence', (profile) => {
    const doc = buildOpenApiDocument(profile);
    expect(doc.info.contact?.name).toEqual(expect.any(String));
    expect(doc.info.license).toEqual(expect.objectContaining({ name: expect.any(String) }));
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const m of HTTP_METHODS) {
        const op = item[m];
        if (!op) continue;
        const where = `${m.toUpperCase()} ${p}`;
        expect(`${where}: ${op.summary}`).toMatch(new RegExp(`^${where.replace(/[{}/.]/g, '\\$&')}: .{3,50}$`));
        expect(`${where}: ${(op.description ?? '').length > 20}`).toBe(`${where}: true`);
      }
    }
    for (const tag of doc.tags!) expect(`${tag.name}: ${(tag.description ?? '').length > 20}`).toBe(`${tag.name}: true`);
    // The introduction is a short screen: the details live in the sections and the guide.
    expect(doc.info.description!.length).toBeLessThan(2200);
  });

  it.each(PROFILES)('%s: shows its own /execute body and holds no component or tag only another profile uses', (profile) => {
    const doc = buildOpenApiDocument(profile);
    const body = doc.paths['/execute']!.post!.requestBody!.content!['application/json']!.schema;
    const own = { transaction: 'BusinessTransaction', attestation: 'AttestationExecuteRequest', 'attestation-simple': 'SignalsRequest' }[profile];
    expect(body).toEqual({ $ref: `#/components/schemas/${own}` });
    const text = JSON.stringify({ paths: doc.paths, webhooks: doc.webhooks, security: doc.security });
    const refs = new Set<string>();
    const follow = (t: string) => {
      for (const [, section, name] of t.matchAll(/"#\/components\/(\w+)\/([^"]+)"/g)) {
        if (refs.has(`${section}/${name}`)) continue;
        refs.add(`${section}/${name}`);
        follow(JSON.stringify(doc.components![section!]![name!] ?? null));
      }
    };
    follow(text);
    for (const s of ['bearerKey', 'simpleApiKey', 'consoleSession']) if (text.includes(`"${s}"`)) refs.add(`securitySchemes/${s}`);
    const present = Object.entries(doc.components!).flatMap(([section, entries]) => Object.keys(entries).map((n) => `${section}/${n}`));
    expect(present.filter((c) => !refs.has(c))).toEqual([]);
    // (`ExecutionResponse` is also what approving a held transaction answers, in every profile: an MCP call can be held in any.)
    const others = { transaction: ['schemas/AttestationExecuteRequest', 'securitySchemes/simpleApiKey'], attestation: ['securitySchemes/simpleApiKey'], 'attestation-simple': ['schemas/AttestationExecuteRequest'] }[profile];
    for (const c of others) expect(present).not.toContain(c);
  });

  it.each(PROFILES)('%s: a curl and an @ets/client request sample on every operation, made from the operation', (profile) => {
    const doc = buildOpenApiDocument(profile);
    const factory = profile === 'transaction' ? 'createClient' : 'createAttestationClient';
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const m of HTTP_METHODS) {
        const op = item[m];
        if (!op) continue;
        const samples = op['x-codeSamples']!;
        expect(samples.map((x) => `${x.lang}/${x.label}`)).toEqual(['Shell/curl', 'TypeScript/@ets/client']);
        const [shell, ts] = samples.map((x) => x.source) as [string, string];
        const keyed = !(Array.isArray(op.security) && op.security.length === 0);
        const url = p.replace(/\{([^}]+)\}/g, (_x, name: string) => `$${name.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}`);
        expect(shell).toMatch(new RegExp(`^curl${m === 'get' ? '' : ` -X ${m.toUpperCase()}`} "\\$ETS_URL${url.replace(/[$?.]/g, '\\$&')}[?"]`));
        expect(shell.includes('Authorization: Bearer $ETS_API_KEY')).toBe(keyed);
        expect(ts).toContain(`import { ${factory} } from '@ets/client';`);
        expect(ts).toContain(`await client.${m.toUpperCase()}('${p}'`);
        expect(ts.includes('apiKey: process.env.ETS_API_KEY')).toBe(keyed);
        if (op.requestBody) {
          const sent = JSON.parse(/-d '(.*)'$/s.exec(shell)![1]!.replace(/'\\''/g, "'"));
          expect(typeof sent).toBe('object');
          expect(ts).toContain(`body: ${JSON.stringify(sent, null, 2).replace(/\n/g, '\n  ')}`);
        }
      }
    }
  });

  it('stands alone: no reference to documents outside it in any fragment or served document; its links into the guide reach a section', () => {
    for (const file of readdirSync(FRAGMENTS).filter((f) => f.endsWith('.yaml'))) {
      const served = JSON.stringify(parseYaml(readFileSync(path.join(FRAGMENTS, file), 'utf8')));
      expect(`${file}: ${OUTSIDE_REFERENCE.exec(served)?.[0] ?? 'none'}`).toBe(`${file}: none`);
    }
    const ids = new Set([...renderGuide(OPERATOR_GUIDE_MARKDOWN).matchAll(/ id="([^"]+)"/g)].map((m) => m[1]));
    for (const profile of PROFILES) {
      const text = openApiYaml(buildOpenApiDocument(profile));
      expect(`${profile}: ${OUTSIDE_REFERENCE.exec(text)?.[0] ?? 'none'}`).toBe(`${profile}: none`);
      const links = [...text.matchAll(/\/documentation#([a-z0-9-]+)/g)].map((m) => m[1]!);
      expect(links.length).toBeGreaterThan(0);
      for (const id of links) expect(`${id}: ${ids.has(id)}`).toBe(`${id}: true`);
    }
  });
});

describe('response checking against the document (support/openapi-responses.ts)', () => {
  const validator = new OpenApiResponseValidator(OPENAPI);
  const problems = (r: Partial<Parameters<OpenApiResponseValidator['check']>[0]>) =>
    validator.check({ method: 'GET', path: '/health', status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: json({ status: 'UP' }), ...r });

  it('accepts a documented response', () => {
    expect(problems({})).toEqual([]);
    expect(problems({ status: 429, headers: { 'content-type': 'application/json', 'retry-after': '3' }, body: json({ error: 'Rate limit exceeded. Try again later.', code: 'RATE_LIMITED' }) })).toEqual([]);
  });

  it('refuses an undocumented status, content type, body or a missing required header', () => {
    expect(problems({ status: 418 })).toEqual([expect.stringMatching(/GET \/health → 418: status 418 is not documented/)]);
    expect(problems({ headers: { 'content-type': 'text/plain' } })).toEqual([expect.stringMatching(/content type 'text\/plain' is not documented/)]);
    expect(problems({ body: json({ status: 'DOWN' }) })).toEqual([expect.stringMatching(/does not match the documented schema/)]);
    expect(problems({ status: 429, body: json({ error: 'x', code: 'RATE_LIMITED' }) })).toEqual([expect.stringMatching(/header Retry-After is missing/)]);
    // The error envelope has only `error` and `code` (spec 2.1).
    expect(problems({ method: 'GET', path: '/version', status: 401, body: json({ error: 'authentication required', detail: 'x' }) })).toEqual([
      expect.stringMatching(/does not match/),
    ]);
  });

  it('prefers a literal path over a template, and matches paths as Express does (trailing slash, any case)', () => {
    const verifyBody = json({ valid: true, errors: [] });
    expect(problems({ method: 'POST', path: '/execution-intents/verify', body: verifyBody })).toEqual([]);
    expect(problems({ path: '/health/' })).toEqual([]);
    expect(problems({ path: '/HEALTH' })).toEqual([]);
    expect(problems({ path: '/health/', body: json({ status: 'DOWN' }) })).toEqual([expect.stringMatching(/GET \/health → 200 \(\/health\/\): the body does not match/)]);
  });

  it('fails a mounted route the document lacks; a request that reaches no route must get the not-found envelope', () => {
    const mounted = [{ method: 'get', template: '/health' }, { method: 'get', template: '/secret/{id}' }];
    const check = (r: Partial<Parameters<OpenApiResponseValidator['check']>[0]>) =>
      validator.check({ method: 'GET', path: '/health', status: 200, headers: { 'content-type': 'application/json' }, body: json({ status: 'UP' }), ...r }, mounted);
    expect(check({ path: '/secret/7', body: json({ any: 'thing' }) })).toEqual([expect.stringMatching(/GET \/secret\/7 → 200: the route GET \/secret\/\{id\} is mounted but the OpenAPI document has no such operation/)]);
    // Not mounted, not documented: the app's fallback answer, and only that.
    expect(check({ path: '/no/such/route', status: 404, body: json({ error: 'Not found.' }) })).toEqual([]);
    expect(check({ method: 'DELETE', path: '/health', status: 404, body: json({ error: 'Not found.' }) })).toEqual([]);
    expect(check({ path: '/no/such/route', status: 200, body: json({ status: 'UP' }) })).toEqual([expect.stringMatching(/no operation of the OpenAPI document matches, and no mounted route/)]);
    expect(check({ path: '/no/such/route', status: 404, body: json({ error: 'Not found.', detail: 'x' }) })).toEqual([expect.stringMatching(/not the error envelope/)]);
    expect(check({ path: '/no/such/route', status: 404, body: Buffer.from('<html>') })).toEqual([expect.stringMatching(/not JSON/)]);
  });

  it('checks records against their schemas', () => {
    const wrong = problems({ method: 'GET', path: '/trust-records/7b1e4c2a-3f5d-4e6a-9b8c-0d1e2f3a4b5c', body: json({ recordType: 'execution-trust-record' }) });
    expect(wrong).toEqual([expect.stringMatching(/must have required property 'businessTransactionHash'/)]);
  });
});

describe('every in-process server a test starts is checked (support/validated-server.ts)', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ets-validated-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('checks a server started with startServer itself, not only through startTestServer', async () => {
    const server = await startServer(loadSettings({ SVC_PORT: '0', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'silent' }), silentLogger);
    try {
      expect((await request(server.url).get('/health')).status).toBe(200);
      expect((await request(server.url).get('/no/such/route')).status).toBe(404);
      // `.` is the id here, as Express matched it; the check must not resolve it away.
      expect((await request(server.url).post('/execution-intents/./resolve')).status).toBe(401);
      expect(takeResponseProblems()).toEqual([]);
      // A handler the document knows nothing about, put in front of the app's routes.
      const probe = express.Router().get('/undocumented-probe', (_req, res) => void res.json({ surprise: true }));
      (server.httpApp.app.router as unknown as { stack: unknown[] }).stack.unshift(...(probe as unknown as { stack: unknown[] }).stack);
      expect((await request(server.url).get('/undocumented-probe')).status).toBe(200);
      expect(takeResponseProblems()).toEqual([expect.stringMatching(/GET \/undocumented-probe → 200: no operation of the OpenAPI document matches/)]);
    } finally {
      await server.close();
    }
  });
});

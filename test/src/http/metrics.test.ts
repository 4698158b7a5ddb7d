import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import request from 'supertest';
import {
  apiKeysEnv,
  bearer,
  businessTransaction,
  makeKey,
  publishPolicy,
  refusedTransaction,
  startTestServer,
  STORAGE_TARGETS,
  type TestServer,
} from '@ets/test-support';

const PROMTOOL = process.env.ETS_TEST_PROMTOOL ?? 'promtool';
const REDIS_URL = process.env.ETS_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const agent = makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] });
const alice = makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true });

/** Every series the operator guide lists, with the labels that must be there. */
const SERIES = [
  'ets_http_requests_total',
  'ets_http_request_duration_seconds_bucket',
  'ets_decisions_total',
  'ets_execution_intents',
  'ets_signing_duration_seconds_bucket',
  'ets_storage_duration_seconds_bucket',
  'ets_rate_limit_refusals_total',
  'ets_egress_calls_total',
  'process_cpu_seconds_total',
];

describe.each(STORAGE_TARGETS)('metrics and readiness with Redis on $name', (factory) => {
  let server: TestServer;
  // A client address of this test only (behind a trusted proxy): the shared Redis counts of other
  // tests never mix with these.
  const ip = `198.51.${randomInt(256)}.${randomInt(1, 255)}`;

  beforeAll(async () => {
    server = await startTestServer(factory, {
      ...apiKeysEnv(agent, alice),
      SVC_METRICS_PORT: '0',
      SVC_REDIS_URL: REDIS_URL,
      SVC_TRUST_PROXY: 'true',
      RATE_LIMIT_HEALTH_PER_MINUTE: '5',
      SVC_DNS_SERVERS: '127.0.0.1:9',
    });
    await publishPolicy(server.dataSource);
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('shows every counter series with its known labels at 0 before anything happened', async () => {
    // The first scrape, before any request of this test: only the server's start happened.
    const text = await (await fetch(server.metricsUrl!)).text();
    const zero = (series: string) => expect({ series, line: new RegExp(`^${series.replace(/[{}"/]/g, '\\$&')} 0$`, 'm').test(text) }).toEqual({ series, line: true });
    for (const route of ['/execute', '/transactions']) for (const outcome of ['approve', 'reject', 'override']) zero(`ets_decisions_total{route="${route}",outcome="${outcome}"}`);
    for (const limiter of ['health', 'public', 'execute', 'auth-failure']) zero(`ets_rate_limit_refusals_total{limiter="${limiter}"}`);
    zero('ets_egress_calls_total{operation="check",outcome="ok",reason=""}');
    for (const reason of ['endpoint', 'dns', 'address', 'connect', 'tls', 'timeout']) {
      zero(`ets_egress_calls_total{operation="check",outcome="refused",reason="${reason}"}`);
      zero(`ets_egress_calls_total{operation="postJson",outcome="not-sent",reason="${reason}"}`);
    }
    for (const reason of ['timeout', 'reset', 'too-large', 'malformed']) zero(`ets_egress_calls_total{operation="postJson",outcome="unknown",reason="${reason}"}`);
    for (const reason of ['2xx', '3xx', '4xx', '5xx']) zero(`ets_egress_calls_total{operation="postJson",outcome="answered",reason="${reason}"}`);
    for (const name of SERIES.filter((n) => !n.startsWith('ets_http_'))) expect({ name, present: new RegExp(`^${name}[{ ]`, 'm').test(text) }).toEqual({ name, present: true });
  });

  it('serves /metrics on its own listener, with every listed series fed by real requests', async () => {
    expect(server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const post = (path: string, body: object) => request(server.url).post(path).set('authorization', bearer(agent)).send(body);
    expect((await post('/execute', businessTransaction())).status).toBe(200);
    const approved = await post('/execute', businessTransaction());
    expect((await post('/execute', refusedTransaction())).status).toBe(403);
    expect((await post('/execute', businessTransaction({ signals: { amount: 20000, country: 'FR' } }))).status).toBe(202);
    expect((await post('/transactions', businessTransaction())).status).toBe(201);
    expect((await request(server.url).get(`/trust-records/${approved.body.businessTransactionId as string}`).set('authorization', bearer(agent))).status).toBe(200);
    expect((await request(server.url).get('/no/such/route/42')).status).toBe(404);
    // Egress: a proposal's endpoint is checked by the egress module (refused: the name does not
    // resolve; the resolver is a loopback port where nothing answers).
    const proposal = await request(server.url)
      .post('/external-connectors/changes')
      .set('authorization', bearer(alice))
      .send({ kind: 'register', capability: 'acme:pay', endpoint: 'https://pay.ets-metrics.example/pay', policyName: 'exec-test', forwardedParameters: ['amount'], reason: 'metrics' });
    expect(proposal.status).toBe(400);
    // Rate-limit refusals: the health limit (5 a minute) for this test's own client address.
    const health = [];
    for (let i = 0; i < 7; i++) health.push((await request(server.url).get('/health').set('x-forwarded-for', ip)).status);
    expect(health.filter((s) => s === 429)).toHaveLength(2);

    const text = await (await fetch(server.metricsUrl!)).text();
    for (const name of SERIES) expect({ name, present: new RegExp(`^${name}[{ ]`, 'm').test(text) }).toEqual({ name, present: true });
    const value = (series: string): number => Number(new RegExp(`^${series.replace(/[{}"/]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    expect(value('ets_http_requests_total{method="POST",route="/execute",status="200"}')).toBe(2);
    expect(value('ets_http_requests_total{method="GET",route="/trust-records/{id}",status="200"}')).toBe(1);
    expect(value('ets_http_requests_total{method="GET",route="unmatched",status="404"}')).toBe(1);
    expect(value('ets_decisions_total{route="/execute",outcome="approve"}')).toBe(2);
    expect(value('ets_decisions_total{route="/execute",outcome="reject"}')).toBe(1);
    expect(value('ets_decisions_total{route="/execute",outcome="override"}')).toBe(1);
    expect(value('ets_decisions_total{route="/transactions",outcome="approve"}')).toBe(1);
    expect(value('ets_execution_intents{state="FINALIZED"}')).toBe(2);
    expect(value('ets_execution_intents{state="PREPARED"}')).toBe(0);
    expect(value('ets_rate_limit_refusals_total{limiter="health"}')).toBe(2);
    expect(value('ets_egress_calls_total{operation="check",outcome="refused",reason="dns"}')).toBe(1);
    expect(value('ets_signing_duration_seconds_count{operation="sign"}')).toBeGreaterThanOrEqual(8);
    expect(value('ets_signing_duration_seconds_count{operation="signText"}')).toBeGreaterThanOrEqual(2);
    // The release and its Trust Record, one commit per execution.
    expect(value('ets_storage_duration_seconds_count{store="execution",operation="completeRelease"}')).toBe(2);
    // The five decisions' authentication events ride their pipeline's first commit (no append of
    // their own); the record read and the refused proposal each append theirs.
    expect(value('ets_storage_duration_seconds_count{store="audit-events",operation="append"}')).toBe(2);
    // Bounded labels: no raw path, id or key anywhere.
    expect(text).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);
    expect(text).not.toContain('pk_local_');
    expect(text).not.toContain('/no/such');

    const other = await fetch(server.metricsUrl!.replace('/metrics', '/other'));
    expect(other.status).toBe(404);
  });

  it('passes `promtool check metrics` with no warning (names and types as Prometheus expects them)', async () => {
    // promtool comes with Debian's prometheus package (.ci/run installs it); a missing one fails here.
    const text = await (await fetch(server.metricsUrl!)).text();
    const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(check.error?.message ?? '').toBe('');
    expect({ status: check.status, out: `${check.stdout}${check.stderr}` }).toEqual({ status: 0, out: '' });
  });

  it('reports Redis in /ready: UP once the shared store is in use', async () => {
    let ready: request.Response | undefined;
    // Each attempt from its own client address: /ready shares the health limit (5 a minute here),
    // and the shared Redis counts every test's loopback requests together.
    const subnet = `198.18.${randomInt(256)}`;
    for (let i = 0; i < 50; i++) {
      ready = await request(server.url).get('/ready').set('x-forwarded-for', `${subnet}.${i + 1}`);
      if (ready.body.redis === 'UP') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(ready!.status).toBe(200);
    expect(ready!.body).toEqual({ status: 'READY', redis: 'UP' });
  });
});

describe('readiness without metrics, and with Redis down', () => {
  let server: TestServer;
  beforeAll(async () => {
    // Nothing listens on port 1: the limiters count per instance, the instance stays READY.
    server = await startTestServer(STORAGE_TARGETS[0]!, { SVC_REDIS_URL: 'redis://127.0.0.1:1' });
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it('answers READY with redis DOWN (degraded, not down), and serves no metrics listener', async () => {
    const ready = await request(server.url).get('/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'READY', redis: 'DOWN' });
    expect(server.metricsUrl).toBeUndefined();
    expect((await request(server.url).get('/metrics')).status).toBe(404);
  });
});

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import tls from 'node:tls';
import { CONNECT_ATTEMPT_FLOOR_MS, connectAttemptMs, EgressFetchError, HttpsEgress } from '@ets/adapters-connectors';
import { answerJson, startTestNetwork, type TestNetwork } from '@ets/test-support';

/**
 * The egress adapter against real HTTPS servers on loopback, reached through the test DNS server
 * and trusting the test CA: the contract's settings, the same adapter the service composes.
 */
describe('egress: every outbound call through one set of rules', () => {
  let network: TestNetwork;
  let egress: HttpsEgress;
  const post = (endpoint: string, body: unknown = { ping: 1 }, timeoutMs = 3000) => egress.postJson({ endpoint, body, timeoutMs });

  beforeAll(async () => {
    network = await startTestNetwork();
    egress = new HttpsEgress({ dnsServers: [network.dns.address], allowCidrs: ['127.0.0.0/8'], extraCaPem: network.ca.certificatePem, maxResponseBytes: 4096 });
  });
  afterAll(async () => {
    await network.close();
  });

  it('posts JSON to a name that resolves to an allowed address, over verified TLS, and answers with the parsed JSON', async () => {
    const srv = await network.https('api.answer.test', (req, res, body) => answerJson({ method: req.method, url: req.url, host: req.headers.host, type: req.headers['content-type'], body: JSON.parse(body) })(req, res, body));
    const r = await post(srv.url('/release?v=1'), { amount: 5 });
    expect(r).toEqual({ outcome: 'answered', status: 200, body: { method: 'POST', url: '/release?v=1', host: `api.answer.test:${srv.port}`, type: 'application/json', body: { amount: 5 } } });
    expect(await egress.check(srv.url('/release'), 2000)).toEqual({ ok: true, addresses: [srv.address] });
  });

  it('resolves the name once per call: the connection goes to the checked address, with no lookup of its own', async () => {
    const srv = await network.https('once.answer.test', answerJson({ ok: true }));
    const before = network.dns.asked('once.answer.test');
    await post(srv.url());
    expect(network.dns.asked('once.answer.test') - before).toBe(2); // one A and one AAAA question
  });

  it('refuses an endpoint that breaks a rule of spec 2.5 before any lookup', async () => {
    for (const endpoint of ['https://2130706433/', 'https://0177.0.0.1/', 'https://0x7f000001/', 'https://127.1/', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://localhost/', 'http://api.answer.test/', 'https://u:p@api.answer.test/', 'https://api.answer.test/#f']) {
      const r = await post(endpoint);
      expect(r).toMatchObject({ outcome: 'not-sent', reason: 'endpoint' });
      expect(await egress.check(endpoint, 1000)).toMatchObject({ ok: false, reason: 'endpoint' });
    }
  });

  it.each([['10.0.0.1'], ['172.16.5.4'], ['192.168.1.10'], ['169.254.169.254'], ['100.64.0.1'], ['0.0.0.0'], ['192.0.2.1']])('a name resolving to %s is refused (checked, never connected)', async (address) => {
    network.dns.set('private.answer.test', { A: [address] });
    expect(await egress.check('https://private.answer.test/x', 2000)).toEqual({ ok: false, reason: 'address', message: expect.stringContaining('not public') });
  });

  it.each([['fd00::1'], ['fe80::1'], ['::ffff:10.0.0.1'], ['64:ff9b::a00:1'], ['2002:a00:1::1'], ['2001:0:4136:e378:8000:63bf:80ff:fffe']])('a name whose AAAA is %s is refused', async (address) => {
    network.dns.set('private6.answer.test', { AAAA: [address] });
    expect(await egress.check('https://private6.answer.test/x', 2000)).toMatchObject({ ok: false, reason: 'address' });
  });

  it.each([['::1'], ['::ffff:127.0.0.1'], ['::ffff:7f00:1'], ['64:ff9b::7f00:1'], ['2002:7f00:1::1'], ['::7f00:1']])(
    'a call to a name resolving to %s (loopback in disguise, outside the allowed 127.0.0.0/8) sends nothing',
    async (address) => {
      const srv = await network.https(`disguise-${Math.random().toString(36).slice(2, 8)}.answer.test`, answerJson({ ok: true }));
      network.dns.set(srv.host, { AAAA: [address] });
      expect(await post(srv.url())).toMatchObject({ outcome: 'not-sent', reason: 'address' });
      expect(srv.received).toEqual([]);
    },
  );

  it('refuses the whole answer when one of several records is not allowed', async () => {
    const srv = await network.https('mixed.answer.test', answerJson({ ok: true }));
    network.dns.set('mixed.answer.test', { A: [srv.address], AAAA: ['::1'] });
    expect(await post(srv.url())).toMatchObject({ outcome: 'not-sent', reason: 'address' });
    network.dns.set('mixed.answer.test', { A: [srv.address, '0.0.0.0'] });
    expect(await post(srv.url())).toMatchObject({ outcome: 'not-sent', reason: 'address' });
    expect(srv.received).toEqual([]);
  });

  it('a name whose answer changes between the check and the call is checked again at the call', async () => {
    const srv = await network.https('rebind.answer.test', answerJson({ ok: true }));
    expect(await egress.check(srv.url(), 2000)).toEqual({ ok: true, addresses: [srv.address] });
    network.dns.set('rebind.answer.test', { A: ['0.0.0.0'] });
    expect(await post(srv.url())).toMatchObject({ outcome: 'not-sent', reason: 'address' });
    network.dns.set('rebind.answer.test', { AAAA: ['::ffff:127.0.0.1'] });
    expect(await post(srv.url())).toMatchObject({ outcome: 'not-sent', reason: 'address' });
    expect(srv.received).toEqual([]);
  });

  it('a name that does not resolve sends nothing', async () => {
    expect(await post('https://nowhere.answer.test/')).toMatchObject({ outcome: 'not-sent', reason: 'dns' });
    expect(await egress.check('https://nowhere.answer.test/', 2000)).toMatchObject({ ok: false, reason: 'dns' });
  });

  it('when the first address refuses the connection the next checked one is tried, and the request arrives once', async () => {
    const srv = await network.https('fallback.answer.test', answerJson({ ok: true }));
    const dead = [network.address(), network.address()];
    network.dns.set('fallback.answer.test', { A: [...dead, srv.address] });
    expect(await post(srv.url(), { n: 1 })).toEqual({ outcome: 'answered', status: 200, body: { ok: true } });
    expect(srv.received).toEqual(['{"n":1}']);
  });

  it('when the first address never answers the connection (SYNs dropped), the next is tried within its share of the deadline, and the request arrives once', async () => {
    const srv = await network.https('syndrop.answer.test', answerJson({ ok: true }));
    const silent = await network.unanswering({ port: srv.port });
    network.dns.set('syndrop.answer.test', { A: [silent.address, srv.address] });
    const started = Date.now();
    expect(await post(srv.url(), { n: 2 }, 3000)).toEqual({ outcome: 'answered', status: 200, body: { ok: true } });
    const elapsed = Date.now() - started;
    expect(srv.received).toEqual(['{"n":2}']);
    // The first address had half of the 3 s (two addresses): not the whole deadline, not nothing.
    expect(elapsed).toBeGreaterThanOrEqual(1400);
    expect(elapsed).toBeLessThan(2500);
  });

  it('when no checked address answers the connection, nothing was sent, and the call ends at its deadline', async () => {
    const first = await network.unanswering();
    const second = await network.unanswering({ port: first.port });
    network.dns.set('allsilent.answer.test', { A: [first.address, second.address] });
    const started = Date.now();
    expect(await post(`https://allsilent.answer.test:${first.port}/`, {}, 2000)).toMatchObject({ outcome: 'not-sent', reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2800);
  });

  it('once the TCP connection is made, its share of the deadline no longer applies: a TLS handshake that never ends does not move on to the next address', async () => {
    const good = await network.https('tlsstall.answer.test', answerJson({ ok: true }));
    const address = network.address();
    const stalled = network.track(net.createServer(() => undefined)); // accepts TCP, never speaks TLS
    await new Promise<void>((r) => stalled.listen(good.port, address, r));
    network.dns.set('tlsstall.answer.test', { A: [address, good.address] });
    expect(await post(good.url(), {}, 2000)).toMatchObject({ outcome: 'not-sent', reason: 'timeout' });
    expect(good.received).toEqual([]);
  });

  it('connectAttemptMs: a share of what is left among the addresses to try, at least the floor; the last one gets the rest', () => {
    expect(connectAttemptMs(3000, 2)).toBe(1500);
    expect(connectAttemptMs(10_000, 4)).toBe(2500);
    expect(connectAttemptMs(3000, 5)).toBe(CONNECT_ATTEMPT_FLOOR_MS);
    expect(connectAttemptMs(400, 3)).toBe(400);
    expect(connectAttemptMs(3000, 1)).toBeUndefined();
  });

  it('when no checked address accepts, nothing was sent', async () => {
    network.dns.set('dead.answer.test', { A: [network.address(), network.address()] });
    expect(await post('https://dead.answer.test:9/')).toMatchObject({ outcome: 'not-sent', reason: 'connect', message: expect.stringContaining('ECONNREFUSED') });
  });

  it('once connected nothing is retried: a TLS failure on the first address does not move on to the next', async () => {
    const good = await network.https('tlsfirst.answer.test', answerJson({ ok: true }));
    const wrong = await network.https('tlsfirst.answer.test', answerJson({ ok: true }), { port: good.port, resolve: false, credentials: await network.ca.issue(['other.answer.test']) });
    network.dns.set('tlsfirst.answer.test', { A: [wrong.address, good.address] });
    expect(await post(good.url())).toMatchObject({ outcome: 'not-sent', reason: 'tls', message: expect.stringContaining('ERR_TLS_CERT_ALTNAME_INVALID') });
    expect(good.received).toEqual([]);
    expect(wrong.received).toEqual([]);
  });

  it('verifies the certificate against the trusted CAs: a CA it does not know is refused', async () => {
    const srv = await network.https('untrusted.answer.test', answerJson({ ok: true }));
    const strict = new HttpsEgress({ dnsServers: [network.dns.address], allowCidrs: ['127.0.0.0/8'] });
    expect(await strict.postJson({ endpoint: srv.url(), body: {}, timeoutMs: 3000 })).toMatchObject({ outcome: 'not-sent', reason: 'tls' });
    expect(srv.received).toEqual([]);
  });

  it('never follows a redirect: it is the answer', async () => {
    const target = await network.https('target.answer.test', answerJson({ reached: true }));
    const srv = await network.https('redirect.answer.test', (_req, res) => {
      res.writeHead(307, { location: target.url('/') });
      res.end();
    });
    expect(await post(srv.url())).toEqual({ outcome: 'answered', status: 307, body: undefined });
    expect(target.received).toEqual([]);
  });

  it('answers that are not JSON, and error statuses, are answers (the caller decides what they mean)', async () => {
    const srv = await network.https('plain.answer.test', (_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('boom');
    });
    expect(await post(srv.url())).toEqual({ outcome: 'answered', status: 500, body: undefined });
  });

  it('an answer over the size cap is an unknown outcome (the request was sent)', async () => {
    const announced = await network.https('big.answer.test', answerJson({ blob: 'x'.repeat(10_000) }));
    expect(await post(announced.url())).toMatchObject({ outcome: 'unknown', reason: 'too-large' });
    const chunked = await network.https('bigchunked.answer.test', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      for (let i = 0; i < 10; i++) res.write('x'.repeat(1000));
      res.end();
    });
    expect(await post(chunked.url())).toMatchObject({ outcome: 'unknown', reason: 'too-large' });
    expect(chunked.received).toHaveLength(1);
  });

  it('a deadline passed after sending is an unknown outcome; the request arrived once', async () => {
    const srv = await network.https('slow.answer.test', () => undefined); // never answers
    expect(await post(srv.url(), { slow: 1 }, 500)).toMatchObject({ outcome: 'unknown', reason: 'timeout' });
    expect(srv.received).toEqual(['{"slow":1}']);
  });

  it('a deadline passed before anything was sent (a TLS handshake that never ends) is not-sent', async () => {
    const address = network.address();
    const silent = network.track(net.createServer(() => undefined)); // accepts TCP, never speaks TLS
    await new Promise<void>((r) => silent.listen(0, address, r));
    network.dns.set('handshake.answer.test', { A: [address] });
    const port = (silent.address() as net.AddressInfo).port;
    expect(await post(`https://handshake.answer.test:${port}/`, {}, 500)).toMatchObject({ outcome: 'not-sent', reason: 'timeout' });
  });

  it('a connection reset after sending is an unknown outcome', async () => {
    const srv = await network.https('reset.answer.test', (req) => req.socket.destroy());
    expect(await post(srv.url())).toMatchObject({ outcome: 'unknown', reason: 'reset' });
    expect(srv.received).toHaveLength(1);
  });

  it('garbage instead of HTTP after sending is an unknown outcome', async () => {
    const address = network.address();
    const creds = await network.ca.issue(['garbage.answer.test']);
    const garbage = network.track(
      tls.createServer(creds, (socket) => {
        socket.once('data', () => socket.end('NOT HTTP AT ALL\r\n\r\n'));
      }),
    );
    await new Promise<void>((r) => garbage.listen(0, address, r));
    network.dns.set('garbage.answer.test', { A: [address] });
    const port = (garbage.address() as net.AddressInfo).port;
    expect(await post(`https://garbage.answer.test:${port}/`)).toMatchObject({ outcome: 'unknown', reason: 'malformed' });
  });

  describe('fetch: the same rules for a client library that speaks HTTP itself (the MCP SDK)', () => {
    const outcomeOf = (p: Promise<unknown>) =>
      p.then(
        () => 'answered',
        (e: unknown) => {
          const f = EgressFetchError.in(e);
          return f ? `${f.outcome}:${f.reason}` : String(e);
        },
      );

    it('sends the request to the checked address over verified TLS and streams the answer back as a Response', async () => {
      const srv = await network.https('fetch.answer.test', (req, res, body) => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-seen': `${req.method} ${req.url} ${req.headers['x-client']} ${body}` });
        res.write('event: message\ndata: {"a":1}\n\n');
        setTimeout(() => res.end('event: message\ndata: {"b":2}\n\n'), 50);
      });
      const r = await egress.fetch(srv.url('/mcp?x=1'), { method: 'POST', headers: { 'x-client': 'sdk', host: 'evil.example.com' }, body: '{"q":1}' });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-seen')).toBe('POST /mcp?x=1 sdk {"q":1}');
      expect(await r.text()).toBe('event: message\ndata: {"a":1}\n\nevent: message\ndata: {"b":2}\n\n');
    });

    it('sends nothing to an endpoint that breaks a rule or resolves to an address that is not allowed (not-sent), and follows no redirect (unknown)', async () => {
      expect(await outcomeOf(egress.fetch('https://127.0.0.1/mcp'))).toBe('not-sent:endpoint');
      expect(await outcomeOf(egress.fetch('http://fetch.answer.test/mcp'))).toBe('not-sent:endpoint');
      const srv = await network.https('fetch-private.answer.test', answerJson({ ok: true }));
      network.dns.set(srv.host, { A: ['10.0.0.1'] });
      expect(await outcomeOf(egress.fetch(srv.url('/mcp'), { method: 'POST', body: '{}' }))).toBe('not-sent:address');
      expect(srv.received).toEqual([]);
      const target = await network.https('fetch-target.answer.test', answerJson({ ok: true }));
      const redirect = await network.https('fetch-redirect.answer.test', (_req, res) => {
        res.writeHead(307, { location: target.url('/mcp') });
        res.end();
      });
      expect(await outcomeOf(egress.fetch(redirect.url('/mcp'), { method: 'POST', body: '{}' }))).toBe('unknown:redirect');
      expect(redirect.received).toHaveLength(1);
      expect(target.received).toEqual([]);
    });

    it('an aborted request before it is sent is not-sent; a streamed answer over the cap errors the stream', async () => {
      const aborted = new AbortController();
      aborted.abort();
      expect(await outcomeOf(egress.fetch('https://fetch.answer.test/', { signal: aborted.signal }))).toBe('not-sent:aborted');
      const big = await network.https('fetch-big.answer.test', (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('x'.repeat(20_000));
      });
      const capped = new HttpsEgress({ dnsServers: [network.dns.address], allowCidrs: ['127.0.0.0/8'], extraCaPem: network.ca.certificatePem, maxStreamBytes: 4096 });
      const r = await capped.fetch(big.url('/mcp'));
      expect(await outcomeOf(r.text())).toBe('unknown:too-large');
    });
  });
});

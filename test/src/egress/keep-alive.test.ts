import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import type net from 'node:net';
import type tls from 'node:tls';
import { EgressFetchError, HttpsEgress, type ConnectionPoolOptions } from '@ets/adapters-connectors';
import { answerJson, startTestNetwork, type TestHandler, type TestHttpsServer, type TestNetwork } from '@ets/test-support';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the server saw of the egress's connections: TLS handshakes, resumed ones, and how many are open now. */
function watchConnections(srv: TestHttpsServer) {
  const seen = { handshakes: 0, resumed: 0, open: 0 };
  srv.server.on('secureConnection', (socket: tls.TLSSocket) => {
    seen.handshakes++;
    if (socket.isSessionReused()) seen.resumed++;
    seen.open++;
    socket.once('close', () => seen.open--);
  });
  return seen;
}

/**
 * Kept connections (issue 26, item 2): the egress keeps a connection after a complete answer and
 * reuses it for the same host, port and checked address, resumes TLS sessions for new ones, and
 * never lets a kept connection bypass a rule or turn a failure into a second request. Real HTTPS
 * servers on loopback, reached through the test DNS server and trusting the test CA.
 */
describe('egress: kept connections and resumed TLS sessions', () => {
  let network: TestNetwork;
  const egresses: HttpsEgress[] = [];
  const newEgress = (keepAlive?: ConnectionPoolOptions) => {
    const e = new HttpsEgress({ dnsServers: [network.dns.address], allowCidrs: ['127.0.0.0/8'], extraCaPem: network.ca.certificatePem, maxResponseBytes: 4096, keepAlive });
    egresses.push(e);
    return e;
  };
  const post = (egress: HttpsEgress, endpoint: string, body: unknown = { ping: 1 }, timeoutMs = 3000) => egress.postJson({ endpoint, body, timeoutMs });
  const server = async (host: string, handler: TestHandler = answerJson({ ok: true }), options?: Parameters<TestNetwork['https']>[2]) => {
    const srv = await network.https(host, handler, options);
    return { srv, seen: watchConnections(srv) };
  };

  beforeAll(async () => {
    network = await startTestNetwork();
  });
  afterAll(async () => {
    for (const e of egresses) e.close();
    await network.close();
  });

  it('calls to one endpoint share one connection: one TLS handshake for many requests, each request arriving once', async () => {
    const egress = newEgress();
    const { srv, seen } = await server('reuse.keep.test');
    for (let n = 0; n < 12; n++) expect(await post(egress, srv.url(), { n })).toEqual({ outcome: 'answered', status: 200, body: { ok: true } });
    expect(seen.handshakes).toBe(1);
    // Every call resolved the name again (one A and one AAAA question each), kept connection or not.
    expect(network.dns.asked('reuse.keep.test')).toBe(24);
    expect(srv.received).toEqual(Array.from({ length: 12 }, (_, n) => `{"n":${n}}`));
    expect(egress.connections).toMatchObject({ idle: 1, reused: 11 });
    // Concurrent calls each have a connection of their own, and all of them are kept.
    const answers = await Promise.all(Array.from({ length: 4 }, (_, n) => post(egress, srv.url(), { c: n })));
    expect(answers.every((a) => a.outcome === 'answered')).toBe(true);
    expect(seen.handshakes).toBe(4);
    expect(egress.connections.idle).toBe(4);
  });

  it('the fetch of the MCP transport reuses a connection once its answer was read to the end, not when it was cancelled', async () => {
    const egress = newEgress();
    const { srv, seen } = await server('fetch.keep.test', (_req, res, body) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (body === 'stream') res.write('data: 1\n\n'); // an SSE stream that stays open
      else res.end(`data: ${body}\n\n`);
    });
    for (let n = 0; n < 3; n++) expect(await (await egress.fetch(srv.url('/mcp'), { method: 'POST', body: `{"n":${n}}` })).text()).toBe(`data: {"n":${n}}\n\n`);
    expect(seen.handshakes).toBe(1);
    expect(await post(egress, srv.url('/mcp'), { n: 3 })).toMatchObject({ outcome: 'answered' }); // postJson and fetch share the pool
    expect(seen.handshakes).toBe(1);
    const r = await egress.fetch(srv.url('/mcp'), { method: 'POST', body: 'stream' });
    const reader = r.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 1\n\n');
    await reader.cancel();
    expect(egress.connections.idle).toBe(0);
    await sleep(50);
    expect(seen.open).toBe(0);
  });

  it('a connection whose answer came before the request was fully written is kept once it is', async () => {
    const egress = newEgress();
    const address = network.address();
    let handshakes = 0;
    const early = network.track(
      https.createServer(await network.ca.issue(['early.keep.test']), (req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"early":true}'); // before reading the body, which waits in the buffers meanwhile
        setTimeout(() => req.resume(), 200);
      }),
    );
    early.on('secureConnection', () => handshakes++);
    await new Promise<void>((r) => early.listen(0, address, r));
    network.dns.set('early.keep.test', { A: [address] });
    const url = `https://early.keep.test:${(early.address() as net.AddressInfo).port}/`;
    for (let n = 0; n < 3; n++) {
      expect(await post(egress, url, { blob: 'x'.repeat(16 * 1024 * 1024) }, 10_000)).toEqual({ outcome: 'answered', status: 200, body: { early: true } });
      // Answered, but the request is still being written: the connection is kept once it is.
      for (let waited = 0; egress.connections.idle === 0 && waited < 5000; waited += 20) await sleep(20);
      expect(egress.connections.idle).toBe(1);
    }
    expect(handshakes).toBe(1);
  });

  it('a new connection resumes the TLS session of the last one to the same endpoint', async () => {
    const egress = newEgress({ idleMs: 0 }); // keeps no connection: every call connects
    const { srv, seen } = await server('resume.keep.test');
    for (let n = 0; n < 3; n++) expect(await post(egress, srv.url())).toMatchObject({ outcome: 'answered' });
    expect(seen.handshakes).toBe(3);
    expect(seen.resumed).toBe(2);
    expect(egress.connections.idle).toBe(0);
  });

  it('a kept connection never serves a call whose fresh resolution does not yield its address: rebinding to a disallowed address sends nothing and closes it', async () => {
    const egress = newEgress();
    const { srv: first, seen: firstSeen } = await server('rebind.keep.test');
    expect(await post(egress, first.url(), { n: 1 })).toMatchObject({ outcome: 'answered' });
    expect(egress.connections.idle).toBe(1);

    // The name moves to another allowed address: the call goes there, the kept connection is closed.
    const { srv: second, seen: secondSeen } = await server('rebind.keep.test', answerJson({ second: true }), { port: first.port });
    expect(await post(egress, first.url(), { n: 2 })).toEqual({ outcome: 'answered', status: 200, body: { second: true } });
    expect(first.received).toEqual(['{"n":1}']);
    expect(second.received).toEqual(['{"n":2}']);
    await sleep(50);
    expect(firstSeen.open).toBe(0);

    // Then to addresses that are not allowed: nothing is sent, and nothing kept for the name survives.
    for (const answer of [{ A: ['10.0.0.1'] }, { A: [second.address, '0.0.0.0'] }, { AAAA: ['::ffff:127.0.0.1'] }]) {
      expect(egress.connections.idle).toBeLessThanOrEqual(1);
      network.dns.set('rebind.keep.test', answer);
      expect(await post(egress, first.url(), { n: 3 })).toMatchObject({ outcome: 'not-sent', reason: 'address' });
      expect(egress.connections.idle).toBe(0);
      network.dns.set('rebind.keep.test', { A: [second.address] });
      expect(await post(egress, first.url(), { n: 4 })).toMatchObject({ outcome: 'answered' });
    }
    expect(second.received).toEqual(['{"n":2}', '{"n":4}', '{"n":4}', '{"n":4}']);
    expect(first.received).toEqual(['{"n":1}']);
    await sleep(50);
    expect(secondSeen.open).toBe(1);
  });

  it('a connection the server closes while idle is dropped, and the next call is answered on a new one (no unknown outcome)', async () => {
    const egress = newEgress();
    // Answers, then closes the connection a little later (a server whose keep-alive time ran out).
    const { srv, seen } = await server('idleclose.keep.test', (req, res) => {
      answerJson({ ok: true })(req, res, '');
      res.once('finish', () => setTimeout(() => req.socket.end(), 20));
    });
    for (let n = 0; n < 5; n++) {
      expect(await post(egress, srv.url(), { n })).toEqual({ outcome: 'answered', status: 200, body: { ok: true } });
      await sleep(100);
      expect(egress.connections.idle).toBe(0);
    }
    expect(seen.handshakes).toBe(5);
    expect(srv.received).toHaveLength(5);
    // One that closes the moment the answer is out: still no unknown outcome.
    const { srv: eager } = await server('eagerclose.keep.test', (req, res) => {
      answerJson({ ok: true })(req, res, '');
      res.once('finish', () => req.socket.end());
    });
    for (let n = 0; n < 5; n++) expect(await post(egress, eager.url(), { n })).toMatchObject({ outcome: 'answered' });
  });

  it("honours the server's Connection: close and Keep-Alive: timeout", async () => {
    const egress = newEgress();
    const { srv: closing, seen: closingSeen } = await server('connclose.keep.test', (req, res) => {
      res.setHeader('connection', 'close');
      answerJson({ ok: true })(req, res, '');
    });
    for (let n = 0; n < 3; n++) expect(await post(egress, closing.url())).toMatchObject({ outcome: 'answered' });
    expect(closingSeen.handshakes).toBe(3);
    expect(egress.connections.idle).toBe(0);

    // Keep-Alive: timeout=2 (Node's server says so for a 2 s keepAliveTimeout): kept for 1 s at most.
    const { srv: hinted } = await server('hint.keep.test');
    hinted.server.keepAliveTimeout = 2000;
    expect(await post(egress, hinted.url())).toMatchObject({ outcome: 'answered' });
    expect(egress.connections.idle).toBe(1);
    await sleep(1200);
    expect(egress.connections.idle).toBe(0);
    // Keep-Alive: timeout=1 (or 0) leaves no time to use it: not kept.
    hinted.server.keepAliveTimeout = 1000;
    expect(await post(egress, hinted.url())).toMatchObject({ outcome: 'answered' });
    expect(egress.connections.idle).toBe(0);
  });

  it('a request written on a kept connection that then fails is an unknown outcome, and is never sent again', async () => {
    const egress = newEgress();
    let calls = 0;
    const { srv, seen } = await server('failreuse.keep.test', (req, res) => {
      calls++;
      if (calls === 2) return req.socket.destroy(); // the second request, on the kept connection: reset after receipt
      if (calls === 4) return; // the fourth: never answered
      answerJson({ ok: true })(req, res, '');
    });
    expect(await post(egress, srv.url(), { n: 1 })).toMatchObject({ outcome: 'answered' });
    expect(await post(egress, srv.url(), { n: 2 })).toMatchObject({ outcome: 'unknown', reason: 'reset' });
    await sleep(200);
    expect(srv.received).toEqual(['{"n":1}', '{"n":2}']);
    expect(seen.handshakes).toBe(1);
    expect(egress.connections.idle).toBe(0);
    // A deadline passed on a kept connection: unknown, the connection is not kept.
    expect(await post(egress, srv.url(), { n: 3 })).toMatchObject({ outcome: 'answered' });
    expect(await post(egress, srv.url(), { n: 4 }, 500)).toMatchObject({ outcome: 'unknown', reason: 'timeout' });
    await sleep(200);
    expect(srv.received).toEqual(['{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}']);
    expect(egress.connections.idle).toBe(0);
    expect(seen.handshakes).toBe(2);
  });

  it('an answer over the cap, or one that is not HTTP, closes the connection: the next call has a new one', async () => {
    const egress = newEgress();
    const { srv, seen } = await server('odd.keep.test', (req, res, body) => {
      if (body === '{"big":true}') return answerJson({ blob: 'x'.repeat(10_000) })(req, res, body);
      answerJson({ ok: true })(req, res, body);
    });
    expect(await post(egress, srv.url(), { big: true })).toMatchObject({ outcome: 'unknown', reason: 'too-large' });
    expect(await post(egress, srv.url())).toMatchObject({ outcome: 'answered' });
    expect(seen.handshakes).toBe(2);
    expect(egress.connections.idle).toBe(1);
  });

  it('an idle connection is not kept longer than the idle time, nor beyond the bounds', async () => {
    const egress = newEgress({ idleMs: 300, maxIdlePerEndpoint: 2 });
    const { srv, seen } = await server('bounds.keep.test');
    await Promise.all(Array.from({ length: 5 }, () => post(egress, srv.url())));
    expect(egress.connections.idle).toBe(2);
    await sleep(500);
    expect(egress.connections.idle).toBe(0);
    await sleep(50);
    expect(seen.open).toBe(0);
  });

  it('close() closes the kept connections and keeps none afterwards (the service stopping)', async () => {
    const egress = newEgress();
    const { srv, seen } = await server('close.keep.test');
    expect(await post(egress, srv.url())).toMatchObject({ outcome: 'answered' });
    expect(seen.open).toBe(1);
    egress.close();
    await sleep(50);
    expect(seen.open).toBe(0);
    expect(egress.connections.idle).toBe(0);
    expect(await post(egress, srv.url())).toMatchObject({ outcome: 'answered' });
    expect(egress.connections.idle).toBe(0);
  });

  it('many reuses of one connection leave no listeners behind (no MaxListenersExceededWarning)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const egress = newEgress();
      const { srv, seen } = await server('listeners.keep.test');
      for (let n = 0; n < 30; n++) await post(egress, srv.url());
      for (let n = 0; n < 15; n++) await (await egress.fetch(srv.url(), { method: 'POST', body: '{}' })).text();
      await sleep(20);
      expect(seen.handshakes).toBe(1);
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a fetch on a kept connection that fails after sending is unknown, and is not sent again', async () => {
    const egress = newEgress();
    let calls = 0;
    const { srv } = await server('fetchfail.keep.test', (req, res) => {
      if (++calls === 2) return req.socket.destroy();
      answerJson({ ok: true })(req, res, '');
    });
    await (await egress.fetch(srv.url(), { method: 'POST', body: '{}' })).text();
    const failed = await egress.fetch(srv.url(), { method: 'POST', body: '{}' }).then(
      () => 'answered',
      (e: unknown) => `${EgressFetchError.in(e)?.outcome}:${EgressFetchError.in(e)?.reason}`,
    );
    expect(failed).toBe('unknown:reset');
    await sleep(100);
    expect(srv.received).toHaveLength(2);
  });
});

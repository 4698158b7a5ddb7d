import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:net';
import { bindPorts, STARTING_ERROR, type BoundPorts } from './listen-first.js';

const opened: BoundPorts[] = [];
const blockers: Server[] = [];
afterEach(async () => {
  for (const p of opened.splice(0)) await p.close();
  for (const b of blockers.splice(0)) b.close();
});

const bind = async (over: Partial<Parameters<typeof bindPorts>[0]> = {}) => {
  const ports = await bindPorts({ host: '127.0.0.1', port: 0, profile: 'transaction', ...over });
  opened.push(ports);
  return ports;
};

describe('the ports, taken before anything is written', () => {
  it('answers while starting without reading anything: /health UP, /ready NOT_READY, anything else 503 with Retry-After', async () => {
    const { url } = await bind();
    const health = await fetch(`${url}/health`);
    expect({ status: health.status, body: await health.json() }).toEqual({ status: 200, body: { status: 'UP' } });
    const ready = await fetch(`${url}/ready`);
    expect({ status: ready.status, body: await ready.json(), retry: ready.headers.get('retry-after') }).toEqual({ status: 503, body: { status: 'NOT_READY', reason: 'the service is starting' }, retry: '1' });
    const execute = await fetch(`${url}/execute`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
    expect({ status: execute.status, body: await execute.json(), retry: execute.headers.get('retry-after'), connection: execute.headers.get('connection') }).toEqual({
      status: 503,
      body: { error: STARTING_ERROR },
      retry: '1',
      connection: 'close',
    });
  });

  it('in profile A, /health is 503 too: its shape needs the runtime', async () => {
    const { url } = await bind({ profile: 'attestation' });
    expect((await fetch(`${url}/health`)).status).toBe(503);
  });

  it('hands every later request to the app once it is served', async () => {
    const ports = await bind();
    ports.serve((_req, res) => res.end('app'));
    expect(await (await fetch(`${ports.url}/anything`)).text()).toBe('app');
  });

  it('fails on a port in use, and on a metrics port in use releases the API port it took', async () => {
    const blocker = createServer();
    blockers.push(blocker);
    const taken = await new Promise<number>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve((blocker.address() as { port: number }).port)));
    await expect(bindPorts({ host: '127.0.0.1', port: taken, profile: 'transaction' })).rejects.toMatchObject({ code: 'EADDRINUSE' });

    const free = await bind();
    const port = Number(new URL(free.url).port);
    await free.close();
    opened.splice(0);
    const metrics = { scrape: async () => '', contentType: 'text/plain' } as never;
    await expect(bindPorts({ host: '127.0.0.1', port, profile: 'transaction', metrics: { host: '127.0.0.1', port: taken } }, metrics)).rejects.toThrow(/cannot listen on SVC_METRICS_HOST:SVC_METRICS_PORT/);
    // The API port is free again.
    const again = await bind({ port });
    expect(again.url).toBe(`http://127.0.0.1:${port}`);
  });
});

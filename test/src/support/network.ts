import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import net, { type Server, type Socket } from 'node:net';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { LoopbackDns, TestCertificateAuthority, type DnsAnswers, type ServerCredentials } from '@ets/loopback-network';

/**
 * The network of the egress tests: a DNS server on loopback whose answers a test controls, a CA
 * made for this run, and HTTPS servers on 127.x.y.z addresses with certificates from it. The
 * service reaches them only through its own egress rules, with the contract's settings (`env`):
 * SVC_DNS_SERVERS, SVC_EGRESS_ALLOW_CIDRS=127.0.0.0/8 (the loopback servers are not public) and
 * NODE_EXTRA_CA_CERTS. `close()` stops everything it started.
 */
export interface TestNetwork {
  dns: LoopbackDns;
  ca: TestCertificateAuthority;
  caFile: string;
  env: { SVC_DNS_SERVERS: string; SVC_EGRESS_ALLOW_CIDRS: string; NODE_EXTRA_CA_CERTS: string };
  /** A fresh loopback address (127.x.y.z) nothing listens on yet. */
  address(): string;
  /**
   * An HTTPS server for `host` on a fresh loopback address (or `options.address`), on a free port
   * (or `options.port`), and `host` resolving to it (unless `options.resolve` is false).
   */
  https(host: string, handler: TestHandler, options?: { address?: string; port?: number; resolve?: boolean; credentials?: ServerCredentials }): Promise<TestHttpsServer>;
  /**
   * A fresh loopback address on which a connection to `port` (or a free one) is never answered:
   * its SYNs are dropped, so a connect neither completes nor is refused (no RST) - a dead host or
   * a dropping firewall. Made with a listener whose accept queue is full and never drained (Linux
   * drops a SYN to such a listener); throws when this machine does not drop them.
   */
  unanswering(options?: { port?: number }): Promise<{ address: string; port: number }>;
  /** Any server (a raw TLS or TCP one) to be closed with the network. */
  track<S extends Server>(server: S): S;
  close(): Promise<void>;
}

export type TestHandler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

export interface TestHttpsServer {
  host: string;
  address: string;
  port: number;
  /** `https://host:port/path`. */
  url(pathname?: string): string;
  /** Bodies of the requests that reached it, in order. */
  received: string[];
  server: https.Server;
}

/** Answers 200 with `value` as JSON. */
export const answerJson =
  (value: unknown, status = 200): TestHandler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };

export async function startTestNetwork(): Promise<TestNetwork> {
  const dns = await LoopbackDns.start();
  const ca = await TestCertificateAuthority.create();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-net-'));
  const caFile = path.join(dir, 'ca.pem');
  writeFileSync(caFile, ca.certificatePem);
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const stoppers: (() => Promise<void>)[] = [];
  // A random 127.x.y.0/24 per network, so parallel test files never share an address.
  const net24 = `127.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
  let next = 1;
  const track = <S extends Server>(s: S): S => {
    servers.push(s);
    // Raw TCP sockets: destroying one ends its TLS session too, and covers servers without closeAllConnections.
    s.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    return s;
  };
  const listen = (s: Server, port: number, address: string) =>
    new Promise<number>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, address, () => resolve((s.address() as { port: number }).port));
    });
  return {
    dns,
    ca,
    caFile,
    env: { SVC_DNS_SERVERS: dns.address, SVC_EGRESS_ALLOW_CIDRS: '127.0.0.0/8', NODE_EXTRA_CA_CERTS: caFile },
    address: () => `${net24}.${++next}`,
    track,
    async unanswering(options = {}) {
      const silent = await startUnanswering(`${net24}.${++next}`, options.port ?? 0);
      stoppers.push(silent.stop);
      return { address: silent.address, port: silent.port };
    },
    async https(host, handler, options = {}) {
      const address = options.address ?? `${net24}.${++next}`;
      const received: string[] = [];
      const server = track(
        https.createServer(options.credentials ?? (await ca.issue([host])), (req, res) => {
          let body = '';
          req.setEncoding('utf8');
          req.on('data', (d: string) => (body += d));
          req.on('end', () => {
            received.push(body);
            handler(req, res, body);
          });
        }),
      );
      const port = await listen(server, options.port ?? 0, address);
      if (options.resolve !== false) dns.set(host, { A: [address] } satisfies DnsAnswers);
      return { host, address, port, url: (p = '/') => `https://${host}:${port}${p}`, received, server };
    },
    async close() {
      for (const stop of stoppers.splice(0)) await stop();
      for (const socket of sockets) socket.destroy();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(() => r(undefined)))));
      await dns.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The listener lives in a worker thread that blocks (Atomics.wait) as soon as it listens, so its
 * event loop never accepts: the kernel completes handshakes until the accept queue (backlog 1) is
 * full and drops every SYN after that. Connections are opened until one does not complete; the
 * ones that did are kept, so the queue stays full.
 */
async function startUnanswering(address: string, port: number): Promise<{ address: string; port: number; stop: () => Promise<void> }> {
  const wake = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const server = require('node:net').createServer();
     server.on('error', (e) => parentPort.postMessage({ error: e.message }));
     server.listen({ host: workerData.address, port: workerData.port, backlog: 1 }, () => {
       parentPort.postMessage({ port: server.address().port });
       Atomics.wait(workerData.wake, 0, 0);
     });`,
    { eval: true, workerData: { address, port, wake } },
  );
  const fillers: Socket[] = [];
  const stop = async () => {
    for (const s of fillers) s.destroy();
    Atomics.store(wake, 0, 1);
    Atomics.notify(wake, 0);
    await worker.terminate();
  };
  try {
    const started = await new Promise<{ port?: number; error?: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    if (started.port === undefined) throw new Error(`cannot listen on ${address}:${port}: ${started.error}`);
    for (let i = 0; i < 16; i++) {
      const socket = net.connect({ host: address, port: started.port });
      socket.on('error', () => undefined);
      fillers.push(socket);
      const connected = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 300);
        socket.once('connect', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (!connected) return { address, port: started.port, stop };
    }
    throw new Error(`${address}:${started.port} kept accepting connections: SYNs to a full accept queue are not dropped here`);
  } catch (e) {
    await stop();
    throw e;
  }
}

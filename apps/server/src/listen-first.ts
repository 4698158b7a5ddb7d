import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Settings } from './config/settings.js';
import { answerClientError } from './http-client-errors.js';
import { startMetricsListener, type MetricsListener } from './metrics/metrics-listener.js';
import type { ServiceMetrics } from './metrics/service-metrics.js';

/**
 * The service's ports, taken before anything is written (review round 2): a start that cannot
 * listen (the port is another instance's, the host is not this machine's) must not migrate,
 * generate signing keys or sign a runtime manifest into a database and a log that a running
 * instance serves. Until `serve` hands the port to the app, every request gets an answer that says
 * the service is starting, and nothing is read or written for it:
 * - `GET /health` in profile T: `200 {"status":"UP"}` (spec 4.1: UP whenever the process runs);
 * - `GET /ready`: `503 {"status":"NOT_READY","reason":…}`, as when the database is not ready;
 * - anything else: `503 {"error":…}` with `Retry-After: 1`.
 * Answers, rather than holding requests until ready: a start may take seconds (migrations, measuring
 * the running code), a held request would meet a client's or a probe's timeout instead, and a
 * load balancer reads 503 as "not yet". Each answer closes its connection, so a client's next
 * request opens a new one, served by the app once it is ready.
 */
export interface BoundPorts {
  readonly server: Server;
  /** `http://host:port` of the API. */
  readonly url: string;
  readonly metrics?: MetricsListener;
  /** The app answers every request from now on. */
  serve(app: RequestListener): void;
  /** Releases both ports (a start that failed after taking them). */
  close(): Promise<void>;
}

export const STARTING_ERROR = 'The service is starting; try again in a moment.';

export async function bindPorts(settings: Pick<Settings, 'host' | 'port' | 'profile' | 'metrics'>, metrics?: ServiceMetrics): Promise<BoundPorts> {
  let handler: RequestListener = answerWhileStarting(settings.profile);
  const server = createServer((req, res) => handler(req, res));
  // Keep-alive sockets must not hold shutdown open longer than the in-flight requests need.
  server.keepAliveTimeout = 5000;
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const closeServer = () =>
    new Promise<void>((done) => {
      server.close(() => done());
      server.closeAllConnections();
    });
  let metricsListener: MetricsListener | undefined;
  if (metrics && settings.metrics) {
    try {
      metricsListener = await startMetricsListener(metrics, settings.metrics.host, settings.metrics.port);
    } catch (e) {
      await closeServer();
      // Named for its own settings (the CLI's listen messages are about SVC_HOST and SVC_PORT).
      throw new Error(`cannot listen on SVC_METRICS_HOST:SVC_METRICS_PORT (${settings.metrics.host}:${settings.metrics.port}): ${(e as Error).message}`);
    }
  }
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    server,
    url: `http://${host}:${port}`,
    metrics: metricsListener,
    serve(app) {
      handler = app;
    },
    async close() {
      await metricsListener?.close();
      await closeServer();
    },
  };
}

function answerWhileStarting(profile: Settings['profile']): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '').split('?')[0];
    const get = req.method === 'GET' || req.method === 'HEAD';
    if (get && path === '/health' && profile === 'transaction') return answer(res, 200, { status: 'UP' });
    if (get && path === '/ready') return answer(res, 503, { status: 'NOT_READY', reason: 'the service is starting' });
    answer(res, 503, { error: STARTING_ERROR });
  };
}

function answer(res: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    connection: 'close',
    ...(status === 503 ? { 'retry-after': '1' } : {}),
  });
  res.end(text);
}

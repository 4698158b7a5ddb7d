import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import type { JSONWebKeySet } from 'jose';
import { handleRelease, type ProtocolAnswer } from './protocol.js';
import { ReleaseVerifier, type ReleaseCondition, type VerifiedRelease } from './verify-release.js';

const MAX_BODY_BYTES = 64 * 1024;

export interface ExampleReceiverOptions {
  /** Its TLS certificate (for `hostName`) and private key, PEM. */
  tls: { cert: string; key: string };
  /** The name the service reaches it by: the endpoint is `https://<hostName>:<port><path>`. */
  hostName: string;
  /** Where it listens; default 127.0.0.1 and a free port. */
  address?: string;
  port?: number;
  path?: string;
  /** The service's JWKS or its URL. */
  jwks: JSONWebKeySet | string;
  issuer?: string;
  /** What it does with a verified release; default: echoes it. */
  act?: (release: VerifiedRelease) => Promise<unknown>;
  checkCondition?: (condition: ReleaseCondition) => boolean | Promise<boolean>;
}

export interface ExampleReceiver {
  /** The endpoint to register (and the `aud` every release to it carries). */
  endpoint: string;
  address: string;
  port: number;
  /** Every release it acted on, in order. */
  executed: VerifiedRelease[];
  /** Every answer it gave. */
  answers: ProtocolAnswer[];
  close(): Promise<void>;
}

/**
 * An endpoint owner's receiver in a few lines: an HTTPS server that takes `POST <path>`, verifies
 * the release with `handleRelease` and acts once per release. `ets demo` and the tests use it.
 */
export async function startExampleReceiver(options: ExampleReceiverOptions): Promise<ExampleReceiver> {
  const path = options.path ?? '/release';
  const executed: VerifiedRelease[] = [];
  const answers: ProtocolAnswer[] = [];
  const act =
    options.act ??
    (async (r: VerifiedRelease) => ({ received: r.parameters, action: r.action, businessTransactionId: r.businessTransactionId, releaseId: r.jti }));
  let verifier: ReleaseVerifier | undefined;
  const sockets = new Set<Socket>();

  const server = https.createServer({ cert: options.tls.cert, key: options.tls.key }, (req, res) => {
    const reply = (a: ProtocolAnswer) => {
      answers.push(a);
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    };
    if (req.method !== 'POST' || req.url !== path) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'refused', reason: `only POST ${path}` }));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = undefined;
      }
      handleRelease(body, verifier!, async (release) => {
        executed.push(release);
        return act(release);
      }, { checkCondition: options.checkCondition }).then(reply, () => reply({ status: 500, body: { status: 'refused', reason: 'internal error' } }));
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.address ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const endpoint = new URL(`https://${options.hostName}:${port}${path}`).href;
  verifier = new ReleaseVerifier({ jwks: options.jwks, audience: endpoint, issuer: options.issuer });
  return {
    endpoint,
    address,
    port,
    executed,
    answers,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

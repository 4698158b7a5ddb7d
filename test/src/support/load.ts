import http from 'node:http';
import { businessTransaction } from './transactions.js';
import { bearer, type TestKey } from './keys.js';

export interface LoadOptions {
  /** Requests in flight at once (default 16). */
  concurrency?: number;
  /** The body of request `i` (default: a fresh approved Business Transaction). */
  body?: (i: number) => Record<string, unknown>;
  /** Default `/execute`; request `i` goes to `urls[i % urls.length]`. */
  path?: string;
}

/**
 * Sends `count` POST requests with a fixed number in flight, spread over the given servers, and
 * returns each one's status (in request order). Each request on its own connection: a keep-alive
 * connection that the server closes after its idle timeout while a starved client is about to
 * reuse it would reset a request the server never read (on a busy CI machine it happens).
 */
export async function postMany(urls: string | string[], key: TestKey, count: number, options: LoadOptions = {}): Promise<number[]> {
  const targets = Array.isArray(urls) ? urls : [urls];
  const statuses: number[] = new Array<number>(count);
  const body = options.body ?? (() => businessTransaction());
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      statuses[i] = await post(new URL(`${targets[i % targets.length]}${options.path ?? '/execute'}`), bearer(key), JSON.stringify(body(i)));
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 16, count) }, worker));
  return statuses;
}

/** A refused Business Transaction (the exec-test policy rejects sanctioned countries). */
export const refusedTransaction = (): Record<string, unknown> => businessTransaction({ signals: { amount: 120, country: 'KP' } });

function post(url: URL, authorization: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent: false, headers: { authorization, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
        res.once('error', reject);
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

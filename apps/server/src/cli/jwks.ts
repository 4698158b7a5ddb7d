import { readFileSync } from 'node:fs';
import type { JwksLike } from '@ets/adapters-crypto';
import { CliError, codeOrMessage, fetchProblem } from './errors.js';

export const FETCH_TIMEOUT_MS = 10_000;

/**
 * A JWKS from a file, or from an http(s) URL (the service's address alone is enough: the JWKS has
 * a well-known path). Exit code 2 when it cannot be read or is not a JWKS.
 */
export async function loadJwks(source: string): Promise<JwksLike> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    let url: URL;
    try {
      url = new URL(source);
    } catch {
      throw new CliError(`--keys ${source} is not a valid URL.`, 2);
    }
    // The service's address alone is enough: the JWKS has a well-known path.
    if (url.pathname === '/' || url.pathname === '') url.pathname = '/.well-known/jwks.json';
    let res: Response;
    try {
      res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } });
    } catch (e) {
      const cause = fetchProblem(e);
      throw new CliError(`cannot fetch the keys from ${url.href} (${cause}). Is the server running? Or pass a saved JWKS file with --keys.`, 2);
    }
    if (res.status !== 200) throw new CliError(`cannot fetch the keys from ${url.href}: HTTP ${res.status}.`, 2);
    text = await res.text();
  } else {
    try {
      text = readFileSync(source, 'utf8');
    } catch (e) {
      throw new CliError(`cannot read the keys file ${source}: ${codeOrMessage(e)}`, 2);
    }
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    throw new CliError(`the keys from ${source} are not JSON (a JWKS, as served by /.well-known/jwks.json, is expected).`, 2);
  }
  if (typeof jwks !== 'object' || jwks === null || !Array.isArray((jwks as { keys?: unknown }).keys)) {
    throw new CliError(`the keys from ${source} are not a JWKS: expected {"keys": [...]}.`, 2);
  }
  return jwks as JwksLike;
}

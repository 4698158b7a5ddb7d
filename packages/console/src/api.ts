/**
 * The console is a client of the service's own API, on the same origin: the session cookie
 * (HttpOnly, set by `POST /console/session`) authenticates every call, and every write carries
 * the session's CSRF token, which lives in this module's memory only (never in storage).
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

let csrfToken: string | undefined;
let onSignedOut: (() => void) | undefined;

export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

/** Called when the service no longer knows the session (401): the page shows the sign-in form. */
export function whenSignedOut(listener: () => void): void {
  onSignedOut = listener;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface Answer<T> {
  status: number;
  body: T;
}

/** One call; an answer of any status is returned (the caller decides), a network failure throws. */
export async function call<T = unknown>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (WRITES.has(method) && csrfToken) headers['x-csrf-token'] = csrfToken;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
  if (res.status === 401 && path !== '/console/session') onSignedOut?.();
  return { status: res.status, body: parsed as T };
}

/** The error of an answer that is not 2xx, with the service's code and message. */
export function errorOf(answer: Answer<unknown>): ApiError {
  const b = answer.body as { error?: unknown; code?: unknown; errors?: unknown } | string;
  const message = typeof b === 'object' && b !== null && typeof b.error === 'string' ? b.error : typeof b === 'string' && b !== '' ? b : `HTTP ${answer.status}`;
  return new ApiError(answer.status, typeof b === 'object' && b !== null && typeof b.code === 'string' ? b.code : undefined, message);
}

/** A GET whose 2xx body is returned; anything else throws ApiError. */
export async function getJson<T>(path: string): Promise<T> {
  const answer = await call<T>('GET', path);
  if (answer.status < 200 || answer.status > 299) throw errorOf(answer);
  return answer.body;
}

/** A text route (`/log/checkpoint`). */
export async function getText(path: string): Promise<string> {
  const answer = await call<string>('GET', path);
  if (answer.status !== 200) throw errorOf(answer);
  return typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
}

/** Every item of a paged list (`{ items, page, pageSize, total }`), at most `maxPages` pages of 100; undefined when the server has no such route (404). */
export async function listAll<T>(path: string, maxPages = 10): Promise<T[] | undefined> {
  const items: T[] = [];
  for (let page = 1; page <= maxPages; page++) {
    const answer = await call<{ items: T[]; total: number }>('GET', `${path}${path.includes('?') ? '&' : '?'}page=${page}&pageSize=100`);
    if (answer.status === 404 && page === 1) return undefined;
    if (answer.status !== 200) throw errorOf(answer);
    items.push(...answer.body.items);
    if (answer.body.items.length < 100 || items.length >= answer.body.total) break;
  }
  return items;
}

export const enc = encodeURIComponent;

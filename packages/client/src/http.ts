import createFetchClient, { type Client } from 'openapi-fetch';
import type { paths as AttestationPaths } from './generated/attestation.js';
import type { paths } from './generated/transaction.js';

export interface ClientOptions {
  /** The service's address, such as `https://ets.example` or `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The caller's bearer API key (`pk_…`), sent as `Authorization: Bearer`; none for the public routes only. */
  apiKey?: string;
  /** Headers sent with every request, beside the key. */
  headers?: Record<string, string>;
  /** The fetch to use (a proxy's, a test's); default: the global one. */
  fetch?: (request: Request) => Promise<Response>;
}

/** Typed calls to every route of the transaction profile: `client.POST('/execute', { body })` → `{ data, error, response }`. */
export type EtsClient = Client<paths, 'application/json'>;
/** Typed calls to every route of the attestation profile (profile A: its own `/execute`, `/verify` and `/health`). */
export type AttestationClient = Client<AttestationPaths, 'application/json'>;

/**
 * A client of a service in the transaction profile (the default, `SVC_PROFILE=transaction`). Paths,
 * parameters, bodies and answers are typed from the service's OpenAPI document: `data` is the
 * documented success body, `error` the documented error body (`{ error, code? }`), `response` the
 * raw Response. Nothing is thrown for an HTTP error status; a network failure rejects.
 */
export function createClient(options: ClientOptions): EtsClient {
  return createFetchClient<paths, 'application/json'>(fetchOptions(options));
}

/** A client of a service in the attestation profile (`SVC_PROFILE=attestation`). */
export function createAttestationClient(options: ClientOptions): AttestationClient {
  return createFetchClient<AttestationPaths, 'application/json'>(fetchOptions(options));
}

function fetchOptions({ baseUrl, apiKey, headers, fetch }: ClientOptions) {
  return {
    baseUrl: baseUrl.replace(/\/+$/, ''),
    headers: { accept: 'application/json', ...headers, ...(apiKey !== undefined ? { authorization: `Bearer ${apiKey}` } : {}) },
    ...(fetch ? { fetch } : {}),
  };
}

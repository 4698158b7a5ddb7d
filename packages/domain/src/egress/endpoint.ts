/**
 * The endpoint rules of spec 2.5 that need no network: an endpoint is an https URL, stored as
 * normalised by URL parsing, whose host is a name with a domain and whose port, when it names one,
 * is 1 to 65535. The WHATWG URL parser turns every
 * numeric spelling of an IPv4 address (2130706433, 0177.0.0.1, 0x7f000001, 127.1) into dotted
 * quads and keeps IPv6 in brackets, so checking the parsed host catches every literal spelling.
 * Where the name resolves is the egress adapter's check (public addresses only, at every call).
 */
import type { Egress } from './ports.js';
import { invalid } from '../shared/errors.js';

export const ENDPOINT_MAX_LENGTH = 2048;

export interface Endpoint {
  /** The normalised URL (`URL.href`): what is stored, and the audience of every release. */
  url: string;
  /** The host name, lower case, without port. */
  host: string;
  port: number;
  /** Path and query, as sent in the request line. */
  path: string;
}

export type EndpointReading = { ok: true; endpoint: Endpoint } | { ok: false; problem: string };

const DOTTED_QUAD = /^\d{1,3}(?:\.\d{1,3}){3}$/;
/** The port written in the authority, if any (before the URL parser refuses one above 65535 as "not a URL"). */
const WRITTEN_PORT = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*:(\d+)(?=[/?#]|$)/i;
// ASCII controls, whitespace and DEL: the URL parser would silently drop some of them.
const INVISIBLE = /[\u0000-\u0020\u007f]/;

/** Reads an endpoint; `problem` completes the sentence "endpoint …". */
export function readEndpoint(raw: unknown): EndpointReading {
  const no = (problem: string): EndpointReading => ({ ok: false, problem });
  if (typeof raw !== 'string' || raw === '') return no('is required: an https URL.');
  if (raw.length > ENDPOINT_MAX_LENGTH) return no(`must be at most ${ENDPOINT_MAX_LENGTH} characters.`);
  if (INVISIBLE.test(raw)) return no('must not contain spaces or control characters.');
  if (raw.includes('#')) return no('must not have a fragment.');
  // Port 0 is no port to connect to (and the URL parser keeps it); one above 65535 none at all.
  const written = WRITTEN_PORT.exec(raw)?.[1];
  if (written !== undefined && !(Number(written) >= 1 && Number(written) <= 65535)) return no('must have a port from 1 to 65535.');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return no('is not a URL.');
  }
  if (url.protocol !== 'https:') return no('must use https.');
  if (url.username !== '' || url.password !== '') return no('must not carry a user name or password.');
  // The URL parser refuses ports above 65535 ("is not a URL") but takes 0, which nothing listens on.
  if (url.port === '0') return no('must have a port from 1 to 65535.');
  const host = url.hostname;
  if (host.startsWith('[') || DOTTED_QUAD.test(host)) return no('must name its host, not an IP address.');
  if (host.endsWith('.')) return no('must not end its host name with a dot.');
  const labels = host.split('.');
  if (labels.includes('localhost')) return no('must not name localhost.');
  if (labels.length < 2 || labels.some((l) => l === '')) return no('must have a host name with a domain (such as api.example.com).');
  return {
    ok: true,
    endpoint: { url: url.href, host, port: url.port === '' ? 443 : Number(url.port), path: `${url.pathname}${url.search}` },
  };
}

/** How long a proposal waits for an endpoint's name to resolve. */
export const ENDPOINT_CHECK_TIMEOUT_MS = 5000;

/**
 * At proposal (connectors, sources): the endpoint's rules, and where its name resolves now: only
 * to public addresses (or allowed ranges). A broken rule is a 400 naming the field (`endpoint`, an MCP server's `url`).
 */
export async function requireResolvingEndpoint(egress: Pick<Egress, 'check'>, endpoint: string, field = 'endpoint'): Promise<void> {
  const checked = await egress.check(endpoint, ENDPOINT_CHECK_TIMEOUT_MS);
  if (!checked.ok) {
    throw invalid(checked.reason === 'endpoint' ? checked.message.replace(/^endpoint\b/, field) : `${field} must resolve only to public addresses: ${checked.message}.`);
  }
}

/**
 * Every outbound call the service makes (external connectors, business signal sources) goes
 * through this port, so that the endpoint rules of spec 2.5 hold for all of them: https only, the
 * host name resolved once and every answer checked (public addresses only), the connection pinned
 * to the checked addresses, no redirects, one deadline, a cap on the answer's size.
 */

/**
 * Why nothing was sent: the endpoint never received a byte of the request.
 * - `endpoint`: it breaks a rule of spec 2.5 (scheme, host, user info, fragment);
 * - `dns`: its host name did not resolve;
 * - `address`: it resolved to an address that is not public (and not in the allowed ranges);
 * - `connect`: no checked address accepted a connection;
 * - `tls`: TLS failed (certificate, host name, handshake);
 * - `timeout`: the deadline passed before anything was sent.
 */
export const NOT_SENT_REASONS = ['endpoint', 'dns', 'address', 'connect', 'tls', 'timeout'] as const;
export type NotSentReason = (typeof NOT_SENT_REASONS)[number];

/**
 * Why the outcome is unknown: the request was (or may have been) sent.
 * - `timeout`; `reset`: the connection was closed or reset before a complete answer;
 * - `too-large`: the answer was larger than the cap; `malformed`: the answer was not valid HTTP.
 */
export const UNKNOWN_REASONS = ['timeout', 'reset', 'too-large', 'malformed'] as const;
export type UnknownReason = (typeof UNKNOWN_REASONS)[number];

export type EgressResult =
  /** `body`: the answer parsed as JSON, or undefined when it is not JSON. Redirects are answers too. */
  | { outcome: 'answered'; status: number; body: unknown }
  | { outcome: 'not-sent'; reason: NotSentReason; message: string }
  | { outcome: 'unknown'; reason: UnknownReason; message: string };

export type EndpointCheck = { ok: true; addresses: string[] } | { ok: false; reason: NotSentReason; message: string };

export interface OutboundJsonRequest {
  /** The endpoint; its rules are checked again on every call. */
  endpoint: string;
  /** Sent as `application/json`, exactly the bytes of `jsonBodyText(body)` (what a signature over the body covers). */
  body: unknown;
  /**
   * Request headers beside the egress's own (lower-case names; `host`, `content-type`,
   * `content-length`, `accept`, `connection` and `user-agent` are the egress's and cannot be replaced).
   */
  headers?: Readonly<Record<string, string>>;
  /** One deadline for resolving, connecting, TLS and the whole answer. */
  timeoutMs: number;
}

export interface Egress {
  /** The endpoint's rules and where its name resolves now; sends nothing (proposals). */
  check(endpoint: string, timeoutMs: number): Promise<EndpointCheck>;
  /** `POST` with a JSON body. Never throws: every failure is a result. Nothing is ever retried once connected. */
  postJson(request: OutboundJsonRequest): Promise<EgressResult>;
}

/** The text of an outbound JSON body: what is sent, byte for byte (UTF-8), for a signature over it. */
export const jsonBodyText = (body: unknown): string => JSON.stringify(body ?? null);

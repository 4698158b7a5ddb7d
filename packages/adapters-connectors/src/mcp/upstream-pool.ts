/**
 * The upstream MCP servers, reached with the official TypeScript SDK's `Client` (the McpUpstreams
 * port): over Streamable HTTP through the egress adapter's pinned `fetch` (every egress rule holds
 * for every request the SDK makes), or over stdio as a child process the operator named in
 * SVC_MCP_STDIO_SERVERS.
 *
 * One session per server, kept and reused; a session that breaks is made again when next needed,
 * after a back-off that doubles with each failure (capped). A stdio server whose process dies is
 * restarted after that back-off without waiting to be needed, and the calls in flight at its death
 * are unknown outcomes. `tools/list` is kept per server and asked again when the upstream says its
 * list changed; a server whose listing fails (or hangs past its timeout) has no tools until it is
 * asked again after its back-off, and holds up no other server. A server's tools outlive its
 * session: a restarted one is asked for them at once, and meanwhile they are offered as they were.
 */
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, ErrorCode, ListToolsResultSchema, McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult, Logger, McpServerRegistration, McpUpstreams, UpstreamCallOutcome, UpstreamTool, UpstreamToolListing } from '@ets/domain';
import { EgressFetchError } from '../egress/pinned-fetch.js';
import type { StdioServerSpec } from './stdio-servers.js';

export interface McpUpstreamPoolOptions {
  /** HttpsEgress.fetch: the egress rules for every request to an HTTPS upstream. */
  fetch: FetchLike;
  /** The operator's SVC_MCP_STDIO_SERVERS, by name. */
  stdioServers: ReadonlyMap<string, StdioServerSpec>;
  logger: Logger;
  /** The back-off after a failure: `initialMs`, doubled per failure in a row, at most `maxMs`. */
  backoff?: { initialMs: number; maxMs: number };
  /** How the gateway names itself to upstreams. */
  clientInfo?: { name: string; version: string };
}

export const DEFAULT_BACKOFF = { initialMs: 250, maxMs: 30_000 };
/** The most tools a server's listing may hold, and the most pages it may take. */
export const MAX_UPSTREAM_TOOLS = 1000;
const MAX_LIST_PAGES = 20;
/** The most one stdio message may hold (the SDK's read buffer), and the longest stderr line logged. */
const STDIO_MAX_BUFFER = 8 * 1024 * 1024;
/** How long making a session (spawning a stdio server, `initialize`) may take. */
export const SESSION_START_TIMEOUT_MS = 30_000;
const STDERR_LINE_MAX = 2000;

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e)).slice(0, 500);

class NotConnected extends Error {
  override readonly name = 'NotConnected';
}

/** Waits for `p` until `deadline` (epoch ms); rejects with NotConnected past it. */
function until<T>(p: Promise<T>, deadline: number, what: string): Promise<T> {
  const ms = deadline - Date.now();
  if (ms <= 0) return Promise.reject(new NotConnected(`the deadline passed before ${what}`));
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new NotConnected(`the deadline passed before ${what}`)), ms);
    p.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e)),
    );
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One upstream server's session, listing and back-off. */
class UpstreamSession {
  private client?: Client;
  private connecting?: Promise<Client>;
  private connectedAt = 0;
  private failures = 0;
  private retryAt = 0;
  private restartTimer?: NodeJS.Timeout;
  private closed = false;
  /** Clients this session closes itself: their end is no crash. */
  private readonly closing = new WeakSet<Client>();

  private tools?: readonly UpstreamTool[];
  private listing?: Promise<UpstreamToolListing>;
  /** Bumped when the upstream says its list changed: a listing begun before it is not kept. */
  private generation = 0;
  private listFailures = 0;
  private listRetryAt = 0;
  private listProblem = '';

  constructor(
    readonly registration: McpServerRegistration,
    private readonly options: Required<Pick<McpUpstreamPoolOptions, 'backoff' | 'clientInfo'>> & McpUpstreamPoolOptions,
    private readonly log: Logger,
  ) {}

  private backoffMs(failures: number): number {
    const { initialMs, maxMs } = this.options.backoff;
    return Math.min(maxMs, initialMs * 2 ** Math.max(0, failures - 1));
  }

  /** The connected client, made (again) if needed, by `deadline`; NotConnected when it cannot be. */
  private async connected(deadline: number): Promise<Client> {
    for (;;) {
      if (this.closed) throw new NotConnected('the server is no longer registered, or the gateway is stopping');
      if (this.client) return this.client;
      if (this.connecting) return until(this.connecting, deadline, `a session with '${this.registration.name}' was made`);
      const wait = this.retryAt - Date.now();
      if (wait > 0) {
        if (Date.now() + wait >= deadline) throw new NotConnected(`'${this.registration.name}' failed a moment ago; it is asked again in ${wait} ms`);
        await sleep(wait);
        continue;
      }
      this.connecting = this.open().finally(() => (this.connecting = undefined));
    }
  }

  private transport() {
    const r = this.registration;
    if (r.url !== null) return new StreamableHTTPClientTransport(new URL(r.url), { fetch: this.options.fetch });
    const spec = this.options.stdioServers.get(r.stdio ?? '');
    if (!spec) throw new NotConnected(`the operator's SVC_MCP_STDIO_SERVERS names no server '${r.stdio}' now`);
    return new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env, stderr: 'pipe', maxBufferSize: STDIO_MAX_BUFFER });
  }

  private async open(): Promise<Client> {
    const client = new Client(this.options.clientInfo, { capabilities: {} });
    try {
      const transport = this.transport();
      if (transport instanceof StdioClientTransport) this.captureStderr(transport);
      client.onclose = () => {
        if (!this.closing.has(client)) this.lost(client);
      };
      client.onerror = (e) => this.log.debug({ err: messageOf(e) }, 'MCP upstream: transport error');
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.listChanged());
      // Its own deadline, not a call's: starting a process (or a cold upstream) may take longer than a
      // call may wait; the call stops waiting at its deadline and the session is there for the next.
      await client.connect(transport, { timeout: Math.max(this.registration.timeoutMs, SESSION_START_TIMEOUT_MS) });
    } catch (e) {
      this.closing.add(client);
      await client.close().catch(() => undefined);
      this.failures++;
      this.retryAt = Date.now() + this.backoffMs(this.failures);
      this.log.warn({ err: messageOf(e), failures: this.failures, retryInMs: this.retryAt - Date.now() }, 'MCP upstream: no session');
      throw e instanceof NotConnected ? e : new NotConnected(`no session with '${this.registration.name}': ${messageOf(e)}`);
    }
    if (this.closed) {
      this.closing.add(client);
      await client.close().catch(() => undefined);
      throw new NotConnected('the server is no longer registered, or the gateway is stopping');
    }
    this.client = client;
    this.connectedAt = Date.now();
    this.log.info({}, 'MCP upstream: session open');
    // A new session (a restarted process, another instance behind the URL) may offer other tools:
    // they are asked for again at once, and the tools known so far are offered meanwhile, so that
    // a restart does not make a server's tools vanish for its callers.
    if (this.tools) {
      this.generation++;
      this.listing ??= this.fetchTools().finally(() => (this.listing = undefined));
    }
    return client;
  }

  /** The session ended without being asked to (a stdio process died, the HTTP session broke). */
  private lost(client: Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    // A session that stayed up for a while starts the back-off afresh; a crash loop doubles it.
    if (Date.now() - this.connectedAt >= this.options.backoff.maxMs) this.failures = 0;
    this.failures++;
    const wait = this.backoffMs(this.failures);
    this.retryAt = Date.now() + wait;
    this.log.warn({ failures: this.failures, restartInMs: wait }, 'MCP upstream: session lost');
    if (this.registration.stdio !== null && !this.closed) {
      clearTimeout(this.restartTimer);
      this.restartTimer = setTimeout(() => void this.connected(Number.POSITIVE_INFINITY).catch(() => this.scheduleRestart()), wait);
      this.restartTimer.unref();
    }
  }

  /** A restart that failed: try again after the (now longer) back-off. */
  private scheduleRestart(): void {
    if (this.closed || this.registration.stdio === null) return;
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.connected(Number.POSITIVE_INFINITY).catch(() => this.scheduleRestart()), Math.max(0, this.retryAt - Date.now()));
    this.restartTimer.unref();
  }

  private captureStderr(transport: StdioClientTransport): void {
    const stderr = transport.stderr;
    if (!stderr) return;
    // Debug only: a server may print anything there; the operator decides whether to see it.
    createInterface({ input: stderr as unknown as NodeJS.ReadableStream }).on('line', (line) => this.log.debug({ stderr: line.slice(0, STDERR_LINE_MAX) }, 'MCP upstream: stderr'));
  }

  private forgetTools(): void {
    this.tools = undefined;
    this.generation++;
  }

  private listChanged(): void {
    this.forgetTools();
    this.listRetryAt = 0;
    void this.listTools();
  }

  listTools(): Promise<UpstreamToolListing> {
    if (this.tools) return Promise.resolve({ ok: true, tools: this.tools });
    if (this.listing) return this.listing;
    if (Date.now() < this.listRetryAt) return Promise.resolve({ ok: false, message: this.listProblem });
    this.listing = this.fetchTools().finally(() => (this.listing = undefined));
    return this.listing;
  }

  private async fetchTools(): Promise<UpstreamToolListing> {
    const deadline = Date.now() + this.registration.timeoutMs;
    try {
      const client = await this.connected(deadline);
      const generation = this.generation;
      const tools: UpstreamTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new McpError(ErrorCode.RequestTimeout, 'tools/list took longer than the timeout');
        const answer = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ListToolsResultSchema, { timeout: remaining });
        tools.push(...(answer.tools as UpstreamTool[]));
        if (tools.length > MAX_UPSTREAM_TOOLS) throw new Error(`it lists more than ${MAX_UPSTREAM_TOOLS} tools`);
        cursor = answer.nextCursor;
        if (cursor === undefined) break;
      }
      const kept = Object.freeze(tools);
      this.listFailures = 0;
      // A listing the upstream said was outdated while it ran is answered, not kept.
      if (generation === this.generation) this.tools = kept;
      return { ok: true, tools: kept };
    } catch (e) {
      this.listFailures++;
      const wait = this.backoffMs(this.listFailures);
      this.listRetryAt = Date.now() + wait;
      this.listProblem = `tools/list of '${this.registration.name}' failed: ${messageOf(e)}`;
      this.log.warn({ err: messageOf(e), retryInMs: wait }, 'MCP upstream: tools/list failed; the server offers no tools until it is asked again');
      return { ok: false, message: this.listProblem };
    }
  }

  async callTool(call: { tool: string; arguments: Record<string, unknown>; timeoutMs: number }): Promise<UpstreamCallOutcome> {
    const deadline = Date.now() + call.timeoutMs;
    let client: Client;
    try {
      client = await this.connected(deadline);
    } catch (e) {
      return { outcome: 'not-sent', message: messageOf(e) };
    }
    try {
      const timeout = Math.max(1, deadline - Date.now());
      const result = await client.request({ method: 'tools/call', params: { name: call.tool, arguments: call.arguments } }, CallToolResultSchema, { timeout });
      return { outcome: 'answered', result: result as CallToolResult };
    } catch (e) {
      return this.failedCall(client, e);
    }
  }

  /** What a failed call means: nothing sent, or an unknown outcome (never retried). */
  private failedCall(client: Client, e: unknown): UpstreamCallOutcome {
    const egress = EgressFetchError.in(e);
    if (egress?.outcome === 'not-sent') return { outcome: 'not-sent', message: egress.message };
    // The SDK says so before it hands the request to the transport.
    if (e instanceof Error && e.message === 'Not connected') return { outcome: 'not-sent', message: 'the session had closed' };
    // MCP: 404 to a request with a session id means the session is gone and the request was not
    // processed. The next call makes a new session.
    if (e instanceof StreamableHTTPError && e.code === 404) {
      this.drop(client);
      return { outcome: 'not-sent', message: 'the upstream ended the session; it is made again for the next call' };
    }
    if (e instanceof McpError && e.code === ErrorCode.RequestTimeout) return { outcome: 'unknown', reason: 'timeout', message: `no answer within ${this.registration.timeoutMs} ms` };
    if (e instanceof McpError && e.code === ErrorCode.ConnectionClosed) return { outcome: 'unknown', reason: 'closed', message: 'the connection closed before the answer (the server may have crashed)' };
    return { outcome: 'unknown', reason: 'error', message: messageOf(e) };
  }

  /** Ends a session that is known to be broken, without counting it as a crash. */
  private drop(client: Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.closing.add(client);
    void client.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    const client = this.client ?? (await this.connecting?.catch(() => undefined));
    this.client = undefined;
    if (client) {
      this.closing.add(client);
      await client.close().catch(() => undefined);
    }
  }
}

export class McpUpstreamPool implements McpUpstreams {
  private readonly sessions = new Map<string, UpstreamSession>();
  private readonly options: Required<Pick<McpUpstreamPoolOptions, 'backoff' | 'clientInfo'>> & McpUpstreamPoolOptions;

  constructor(options: McpUpstreamPoolOptions) {
    this.options = { backoff: DEFAULT_BACKOFF, clientInfo: { name: 'ets-mcp-gateway', version: '1.0.0' }, ...options };
  }

  private session(registration: McpServerRegistration): UpstreamSession {
    let s = this.sessions.get(registration.registrationId);
    if (!s) {
      s = new UpstreamSession(registration, this.options, this.options.logger.child({ mcpServer: registration.name }));
      this.sessions.set(registration.registrationId, s);
    }
    return s;
  }

  listTools(server: McpServerRegistration): Promise<UpstreamToolListing> {
    return this.session(server).listTools();
  }

  callTool(server: McpServerRegistration, call: { tool: string; arguments: Record<string, unknown>; timeoutMs: number }): Promise<UpstreamCallOutcome> {
    return this.session(server).callTool(call);
  }

  retain(active: readonly McpServerRegistration[]): void {
    const keep = new Set(active.map((r) => r.registrationId));
    for (const [id, s] of this.sessions) {
      if (keep.has(id)) continue;
      this.sessions.delete(id);
      void s.close();
    }
  }

  /** Closes every session (and ends every stdio process): at shutdown. */
  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map((s) => s.close()));
  }
}

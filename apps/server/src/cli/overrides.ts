import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { signStepUpPayload } from '@ets/adapters-crypto';
import { charLength, HELD_STATUSES, REASON_MAX_LENGTH, STEP_UP_MAX_VALIDITY_MS, type ApprovalPayload } from '@ets/domain';
import { CliError, codeOrMessage, fetchProblem } from './errors.js';
import { usageOf } from './usage.js';

/**
 * `ets overrides list|show|approve|reject` (CONTRACT "Held transactions"): a human decides a held
 * transaction from a shell, with their own API key (ETS_API_KEY, never an argument: arguments show
 * in `ps` to every user of the machine) and their own step-up key file. What is signed is built
 * from what the service shows of the transaction (`GET /overrides/{id}`: its scope and signals
 * hash), exactly as @ets/client's `heldTransactions` does; the server checks every field again.
 */
export const DEFAULT_SERVICE_URL = 'http://127.0.0.1:8080';
const DEFAULT_TTL_SECONDS = 300;
const MAX_TTL_SECONDS = STEP_UP_MAX_VALIDITY_MS / 1000;
const REQUEST_TIMEOUT_MS = 130_000; // an approval waits for the release (the connector's own timeout)

/** A held transaction as `GET /overrides/{id}` serves it: the fields the CLI reads. */
export interface HeldView {
  businessTransactionId: string;
  callerId: string;
  action: string;
  signals: Record<string, unknown>;
  signalsHash: string;
  scope?: ApprovalPayload['scope'];
  status: string;
  createdAt: string;
  expiresAt: string;
  decision?: { reason?: string; matchedRuleId?: string | null };
  decidedBy?: string;
  reason?: string;
}

export async function overridesCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
      return list(rest);
    case 'show':
      return show(rest);
    case 'approve':
      return approve(rest);
    case 'reject':
      return reject(rest);
    default:
      throw new CliError(usageOf('overrides'), 2);
  }
}

const COMMON = { url: { type: 'string' } } as const;

async function list(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON, status: { type: 'string' }, page: { type: 'string' }, 'page-size': { type: 'string' }, json: { type: 'boolean' } }, strict: true });
  if (positionals.length) throw new CliError(usageOf('overrides list'), 2);
  const status = values.status?.toUpperCase();
  if (status !== undefined && !(HELD_STATUSES as readonly string[]).includes(status)) throw new CliError(`--status must be one of ${HELD_STATUSES.join(', ')}.`, 2);
  const query = new URLSearchParams({ ...(status ? { status } : {}), ...(values.page ? { page: wholeNumber('--page', values.page) } : {}), ...(values['page-size'] ? { pageSize: wholeNumber('--page-size', values['page-size']) } : {}) });
  const service = serviceOf(values.url);
  const page = (await service.call('GET', `/overrides${query.size ? `?${query}` : ''}`)) as { items: HeldView[]; page: number; pageSize: number; total: number };
  if (values.json) return void process.stdout.write(JSON.stringify(page, null, 2) + '\n');
  if (page.items.length === 0) {
    process.stdout.write(`No held transactions${status ? ` ${status}` : ''}.\n`);
    return;
  }
  const rows = page.items.map((h) => [h.businessTransactionId, h.status, h.action, h.callerId, h.createdAt, h.status === 'PENDING' ? `expires ${h.expiresAt}` : `${h.decidedBy ? `by ${h.decidedBy}` : ''}`.trim(), h.decision?.reason ?? '']);
  const head = ['ID', 'STATUS', 'ACTION', 'CALLER', 'HELD AT', 'UNTIL / BY', 'WHY'];
  const widths = head.map((_, i) => Math.max(head[i]!.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [head, ...rows]) process.stdout.write(row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd() + '\n');
  const shown = (page.page - 1) * page.pageSize + page.items.length;
  if (shown < page.total) process.stdout.write(`(${page.items.length} of ${page.total}: --page ${page.page + 1} for more)\n`);
}

async function show(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: COMMON, allowPositionals: true, strict: true });
  const id = idOf(positionals, 'overrides show');
  process.stdout.write(JSON.stringify(await serviceOf(values.url).call('GET', `/overrides/${encodeURIComponent(id)}`), null, 2) + '\n');
}

async function approve(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON, key: { type: 'string' }, ttl: { type: 'string' } }, allowPositionals: true, strict: true });
  const id = idOf(positionals, 'overrides approve');
  const pem = keyFile(values.key, 'overrides approve');
  const ttlSeconds = ttlOf(values.ttl);
  const { approverId, answer } = await approveHeld(serviceOf(values.url), id, pem, values.key!, ttlSeconds);
  // The answer (what POST /execute would have answered) on stdout, for `ets verify -`; the summary for the person on stderr.
  process.stdout.write(JSON.stringify(answer, null, 2) + '\n');
  process.stderr.write(`Approved ${id} as ${approverId}: ${answer.executionStatus ?? 'released'}; the answer on stdout carries its signed Trust Record (ets verify -).\n`);
}

async function reject(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { ...COMMON, key: { type: 'string' }, reason: { type: 'string' }, ttl: { type: 'string' } }, allowPositionals: true, strict: true });
  const id = idOf(positionals, 'overrides reject');
  const pem = keyFile(values.key, 'overrides reject');
  const reason = values.reason;
  if (reason === undefined || reason.trim() === '') throw new CliError(`--reason TEXT is required: it is recorded as the rejection reason. ${usageOf('overrides reject')}`, 2);
  if (charLength(reason) > REASON_MAX_LENGTH) throw new CliError(`--reason must be at most ${REASON_MAX_LENGTH} characters.`, 2);
  const ttlSeconds = ttlOf(values.ttl);
  const service = serviceOf(values.url);
  const me = (await service.call('GET', '/callers/me')) as { callerId: string };
  const payload = {
    businessTransactionId: id,
    action: 'reject',
    expiresAt: new Date(Date.now() + ttlSeconds * 1000).toISOString(),
    nonce: randomBytes(32).toString('base64url'),
    callerId: me.callerId,
    reason,
  };
  const view = (await service.call('POST', `/overrides/${encodeURIComponent(id)}/reject`, { payload, signature: sign(pem, payload, values.key!) })) as HeldView;
  process.stdout.write(JSON.stringify(view, null, 2) + '\n');
  process.stderr.write(`Rejected ${id} as ${me.callerId}: ${view.status}; its signed Refusal Record is at /refusal/${id}.\n`);
}

export type Service = ReturnType<typeof serviceOf>;

/**
 * Approves a held transaction as the service's caller: reads it, signs an approval of what it
 * shows with `pem` (the caller's step-up key, read from `keyPath`) and sends it. `ets overrides
 * approve` and the demo's human approver run this. Answers what POST /execute would have answered.
 */
export async function approveHeld(service: Service, id: string, pem: string, keyPath: string, ttlSeconds = DEFAULT_TTL_SECONDS): Promise<{ approverId: string; answer: { executionStatus?: string } & Record<string, unknown> }> {
  const held = (await service.call('GET', `/overrides/${encodeURIComponent(id)}`)) as HeldView;
  if (held.status !== 'PENDING') throw new CliError(`${id} is ${held.status}${held.decidedBy ? ` (decided by ${held.decidedBy})` : ''}: only a PENDING transaction can be approved.`);
  const me = (await service.call('GET', '/callers/me')) as { callerId: string };
  const payload = heldApprovalPayload(held, me.callerId, ttlSeconds);
  const answer = (await service.call('POST', `/overrides/${encodeURIComponent(id)}/approve`, { payload, signature: sign(pem, payload, keyPath) })) as { executionStatus?: string } & Record<string, unknown>;
  return { approverId: me.callerId, answer };
}

/**
 * The approval of a held transaction (CONTRACT "Signed approvals"), bound to what the service
 * shows of it: its id and action, the scope its policy asks for (the transaction itself when the
 * policy names none), the hash of its signals, the approver's own caller id; single use (a fresh
 * id and nonce) and expiring `ttlSeconds` from now, at most 15 minutes.
 */
export function heldApprovalPayload(held: HeldView, approverId: string, ttlSeconds = DEFAULT_TTL_SECONDS): ApprovalPayload {
  return {
    approvalId: randomUUID(),
    approverId,
    businessTransactionId: held.businessTransactionId,
    action: held.action,
    scope: held.scope ?? { field: 'resourceId', resourceId: held.businessTransactionId },
    signalsHash: held.signalsHash,
    expiresAt: new Date(Date.now() + Math.min(ttlSeconds, MAX_TTL_SECONDS) * 1000).toISOString(),
    nonce: randomBytes(32).toString('base64url'),
  };
}

/** The service at `--url`, else ETS_URL, else the default address, with the caller's key from ETS_API_KEY. */
export function serviceOf(url: string | undefined, env: NodeJS.ProcessEnv = process.env): { baseUrl: string; call(method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> } {
  const baseUrl = (url ?? env.ETS_URL ?? DEFAULT_SERVICE_URL).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(baseUrl)) throw new CliError(`--url must be an http(s) address, such as ${DEFAULT_SERVICE_URL}.`, 2);
  const apiKey = env.ETS_API_KEY?.trim();
  if (!apiKey) throw new CliError('ETS_API_KEY is not set: export your API key in it (never pass a key as an argument: arguments show in `ps` to every user of this machine).', 2);
  return {
    baseUrl,
    async call(method, route, body) {
      let res: Response;
      try {
        res = await fetch(baseUrl + route, {
          method,
          headers: { accept: 'application/json', authorization: `Bearer ${apiKey}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (e) {
        throw new CliError(`no answer from the service at ${baseUrl} (${fetchProblem(e)}): is it running there? (--url or ETS_URL)`);
      }
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = text;
      }
      if (!res.ok) {
        const err = parsed as { error?: unknown; code?: unknown } | undefined;
        const message = typeof err?.error === 'string' ? err.error : typeof parsed === 'string' ? parsed.slice(0, 200) : '';
        throw new CliError(`the service refused ${method} ${route.split('?')[0]}: ${res.status}${typeof err?.code === 'string' ? ` ${err.code}` : ''}${message ? `: ${message}` : ''}`);
      }
      return parsed;
    },
  };
}

function idOf(positionals: string[], command: string): string {
  if (positionals.length !== 1 || positionals[0]!.trim() === '') throw new CliError(`one ID is required (the businessTransactionId). ${usageOf(command)}`, 2);
  return positionals[0]!.trim();
}

function keyFile(path: string | undefined, command: string): string {
  if (!path) throw new CliError(`--key FILE is required (your Ed25519 step-up private key, PEM). ${usageOf(command)}`, 2);
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read the step-up key ${path}: ${codeOrMessage(e)}`, 2);
  }
}

function sign(pem: string, payload: object, path: string): string {
  try {
    return signStepUpPayload(pem, payload);
  } catch (e) {
    throw new CliError(`${(e as Error).message} (${path}).`, 2);
  }
}

function ttlOf(text: string | undefined): number {
  const ttl = text ?? String(DEFAULT_TTL_SECONDS);
  if (!/^\d+$/.test(ttl) || Number(ttl) < 1 || Number(ttl) > MAX_TTL_SECONDS) throw new CliError(`--ttl must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}.`, 2);
  return Number(ttl);
}

function wholeNumber(flag: string, text: string): string {
  if (!/^[1-9]\d{0,5}$/.test(text)) throw new CliError(`${flag} must be a whole number from 1.`, 2);
  return text;
}

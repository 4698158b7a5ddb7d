import { generateKeyPairSync } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { ApiKeyRecord } from '@ets/domain';
import { loadSettings } from '../config/settings.js';
import { INSTALL_ROOT } from '../install-root.js';
import { ApiKeyFile, generateRawKey, hashKey } from '../keys/api-keys.js';
import { createLogger } from '../logger.js';
import { startServer } from '../server.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { CliError, fetchProblem } from './errors.js';
import { stopWhenParentExits } from './parent-watch.js';
import { stopOnSignals } from './serve.js';
import { stepUpEnvelope } from './step-up.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('quickstart');
const AGENT = 'quickstart-agent';
const APPROVER = 'quickstart-approver';
/** The policy shipped with the product (apps/server/policies), proposed by `system` at every start. */
const POLICY = { name: 'payments-transfer', version: '1.0.0' } as const;
/** The only settings taken from the environment: where to listen and how much to log. */
const TAKEN_FROM_ENVIRONMENT = ['SVC_HOST', 'SVC_PORT', 'SVC_LOG_LEVEL'] as const;

/**
 * `ets quickstart`: a newcomer's first executed and verified action, on one machine. It starts a
 * throwaway service in sandbox mode in a folder of its own, with two callers it makes: an agent
 * that may request `sandbox:echo`, and a sandbox approver (a USER with a step-up key). The shipped
 * policy waits for a human approval like every change; the sandbox approver gives it, through the
 * API and with its step-up signature, exactly as a second human would. Nothing in the service is
 * relaxed: the proposer (`system`) and the approver are different callers, and the approval is a
 * signature over the change. What makes it a sandbox is that this command made and holds the
 * approver's key; in a deployment it is a second human's, on their own machine.
 *
 * Then it prints the one command that executes an action as the agent and verifies the signed
 * record that comes back, offline, and serves until stopped.
 */
export async function quickstartCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { dir: { type: 'string' } }, allowPositionals: true, strict: true });
  if (positionals.length > 0) throw new CliError(`Unexpected argument '${positionals[0]}'.\n${USAGE}`, 2);
  const dir = values.dir === undefined ? mkdtempSync(path.join(os.tmpdir(), 'ets-quickstart-')) : newFolder(values.dir);

  const env: Record<string, string> = { SVC_SANDBOX: 'true', SVC_DATA_DIR: path.join(dir, 'data') };
  for (const name of TAKEN_FROM_ENVIRONMENT) if (process.env[name] !== undefined) env[name] = process.env[name]!;
  const settings = loadSettings(env);

  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const approverPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  writeFileAtomic(path.join(dir, 'approver-step-up.pem'), approverPem, { mode: 0o600 });
  const keys = { agent: generateRawKey(), approver: generateRawKey() };
  const createdAt = new Date().toISOString();
  const records: ApiKeyRecord[] = [
    { callerId: AGENT, keyHash: hashKey(keys.agent), credentialHolderType: 'SERVICE', allowedCapabilities: ['sandbox:echo'], allowedTenantIds: [], createdAt },
    {
      callerId: APPROVER,
      keyHash: hashKey(keys.approver),
      credentialHolderType: 'USER',
      allowedCapabilities: [],
      allowedTenantIds: [],
      stepUpPublicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string,
      createdAt,
    },
  ];
  new ApiKeyFile(settings.apiKeysFile).write(records);
  writeFileAtomic(
    path.join(dir, 'keys.env'),
    [`# ets quickstart: the raw API keys of its callers (only their hashes are in ${settings.apiKeysFile}).`, `QUICKSTART_AGENT_KEY=${keys.agent}`, `QUICKSTART_APPROVER_KEY=${keys.approver}`, ''].join('\n'),
    { mode: 0o600 },
  );

  const logFile = path.join(dir, 'server.log');
  const logger = createLogger(settings.logLevel, createWriteStream(logFile, { flags: 'a', mode: 0o600 }));
  const say = (text = '') => process.stdout.write(`${text}\n`);
  const lifecycle = stopOnSignals(logger, () => say(`\nStopped. Its folder stays for you to look at: ${dir} (delete it when done).`));
  say('ets quickstart: a SANDBOX service for trying the service on this machine. It is not a deployment.');
  say(`  folder   ${dir}: its own database, signing keys, API keys (keys.env) and log (server.log)`);
  const running = await startServer(settings, logger);
  lifecycle.started(running);
  stopWhenParentExits(() => lifecycle.stop('parent exited'));
  say(`  service  ${running.url} in sandbox mode (SVC_SANDBOX=true): the built-in sandbox connector echoes each action, nothing real is done`);
  say(`           the guide is at ${running.url}/documentation, the API reference at ${running.url}/reference`);
  say();

  let change: string;
  try {
    change = await approveShippedPolicy(running.url, keys.approver, approverPem);
  } catch (e) {
    await running.close();
    throw e;
  }
  say(`Maker-checker: the shipped policy ${POLICY.name} ${POLICY.version} was proposed by 'system' at start, and approved by`);
  say(`'${APPROVER}', a USER with its own Ed25519 step-up key, who signed the approval of change ${change}.`);
  say('In this sandbox, this command made that key and holds it (approver-step-up.pem in the folder). In a real');
  say('deployment the approver is a second human, holding their own key; nobody approves their own change.');
  say();
  say(`Now, in another terminal, run this: the agent '${AGENT}' asks the service to execute a transfer, and the`);
  say('signed Execution Trust Record of the answer is verified offline, with only the service\'s public keys:');
  say();
  say(executeAndVerifyCommand(running.url, keys.agent));
  say();
  say(`Ctrl-C stops the service. Each run of that command is a new transaction; the agent's key is in ${path.join(dir, 'keys.env')}.`);
}

/** DIR of --dir: made when missing, refused when it holds anything. */
function newFolder(dirArg: string): string {
  if (dirArg.trim() === '') throw new CliError(`--dir needs a folder.\n${USAGE}`, 2);
  const dir = path.resolve(dirArg);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (readdirSync(dir).length > 0) throw new CliError(`--dir ${dirArg} is not empty: give a new or empty folder (or none, for a temporary one).`, 2);
  return dir;
}

/** The approver approves the pending change of the shipped policy, as any checker does: over the API, with a step-up envelope. */
async function approveShippedPolicy(url: string, key: string, stepUpPem: string): Promise<string> {
  const call = async (route: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
    let res: Response;
    try {
      res = await fetch(url + route, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      throw new CliError(`the service at ${url} did not answer ${route} (${fetchProblem(e)}).`, 1);
    }
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
  };
  const pending = await call('/policies/pending-changes?status=PENDING_APPROVAL&pageSize=100');
  const items = Array.isArray(pending.body.items) ? (pending.body.items as Record<string, unknown>[]) : [];
  const change = items.find((c) => c.policyName === POLICY.name && c.policyVersion === POLICY.version);
  if (pending.status !== 200 || typeof change?.id !== 'string') {
    throw new CliError(`the shipped policy ${POLICY.name} ${POLICY.version} is not waiting for an approval (${pending.status} ${JSON.stringify(pending.body).slice(0, 200)}).`, 1);
  }
  const approved = await call(`/policies/pending-changes/${encodeURIComponent(change.id)}/approve`, stepUpEnvelope(stepUpPem, { change: change.id, action: 'approve', callerId: APPROVER }));
  if (approved.status !== 200 || approved.body.status !== 'APPROVED') {
    throw new CliError(`the approval of ${POLICY.name} ${POLICY.version} was refused: ${approved.status} ${JSON.stringify(approved.body).slice(0, 200)}`, 1);
  }
  return change.id;
}

/**
 * One shell command, ready to paste anywhere: `POST /execute` as the agent with a fresh
 * businessTransactionId, piped to `ets verify -`, which reads the answer's Trust Record and checks
 * it with the JWKS of the service.
 */
export function executeAndVerifyCommand(url: string, agentKey: string): string {
  const transaction = JSON.stringify({
    businessTransactionId: '@ID@',
    metadata: {},
    authority: { principalId: AGENT, authorityId: 'quickstart' },
    authorization: { authorityId: 'quickstart' },
    intent: { action: 'sandbox:echo', parameters: { amount: 120, currency: 'EUR' } },
    policy: POLICY,
    signals: { amount: 120, country: 'FR' },
  }).replace('"@ID@"', () => `"'"$(node -p 'crypto.randomUUID()')"'"`);
  return [
    `curl -s -X POST ${url}/execute \\`,
    `  -H 'Authorization: Bearer ${agentKey}' -H 'Content-Type: application/json' \\`,
    `  -d '${transaction}' \\`,
    `  | node ${shellWord(path.join(INSTALL_ROOT, 'apps', 'server', 'bin', 'ets.js'))} verify - --keys ${url}`,
  ].join('\n');
}

const shellWord = (text: string): string => (/^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`);

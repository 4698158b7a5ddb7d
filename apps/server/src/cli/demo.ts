import { generateKeyPairSync, randomUUID } from 'node:crypto';
import dgram from 'node:dgram';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parse as parseDotenv } from 'dotenv';
import { verifyOffline, type JwksLike } from '@ets/adapters-crypto';
import type { LoopbackDns } from '@ets/loopback-network';
import { startExampleReceiver, type ExampleReceiver } from '@ets/release-receiver';
import type { ApiKeyRecord } from '@ets/domain';
import { loadSettings } from '../config/settings.js';
import { ApiKeyFile, generateRawKey, hashKey } from '../keys/api-keys.js';
import { readSigningKey, startReferenceSource, type RunningReferenceSource } from '../signal-source/reference-source.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { CliError, codeOrMessage, fetchProblem } from './errors.js';
import { certificateFiles, portOption, startResolver, writeLocalNetwork } from './local-network.js';
import { approveHeld, serviceOf } from './overrides.js';
import { stepUpEnvelope } from './step-up.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('demo');

/** The demo's callers: two humans (maker and checker) and an agent. */
const CALLERS = { alice: 'demo-alice', bob: 'demo-bob', agent: 'demo-agent' } as const;
const DEMO_TENANT = 'demo';
const DEMO_POLICY = 'demo-payments';
const ENV_FILE = 'demo.env';
/** The server's settings for the demo: sandbox mode, and the demo's resolver and CA for the external connector. */
const SERVER_ENV_FILE = 'server.env';
/** The capability the demo registers as an external connector, and the name of its receiver. */
const EXTERNAL_CAPABILITY = 'demopay:transfer';
const RECEIVER_HOST = 'receiver.ets-demo.test';
/** The business signal source of the demo: the reference source, answering from DIR/facts.json. */
const SOURCE_HOST = 'erp.ets-demo.test';
const SOURCE_NAME = 'demo-erp';
const SOURCED_POLICY = 'demo-invoices';
const INVOICE = { id: 'demo-inv-1', amount: 420 } as const;
/**
 * The MCP gateway's part: the upstream `demo-bank` (the stdio server of demo-mcp-upstream.ts, named
 * in DIR/mcp-servers.json, which the server reads from SVC_MCP_STDIO_SERVERS), its tool and the
 * policy that decides its calls.
 */
const MCP_SERVER = 'demo-bank';
const MCP_TOOL = `${MCP_SERVER}__transfer`;
const MCP_CAPABILITY = `mcp-${MCP_SERVER}:transfer`;
const MCP_POLICY = 'demo-mcp';
const MCP_SERVERS_FILE = 'mcp-servers.json';
/**
 * The demo's network, in demo.env: its resolver's address, the receiver's and the source's
 * certificates, the source's signing key and facts, and the ports chosen at setup (0: any free one).
 */
const NETWORK_ENV = {
  dns: 'ETS_DEMO_DNS',
  cert: 'ETS_DEMO_RECEIVER_CERT',
  key: 'ETS_DEMO_RECEIVER_KEY',
  receiverPort: 'ETS_DEMO_RECEIVER_PORT',
  sourceCert: 'ETS_DEMO_SOURCE_CERT',
  sourceKey: 'ETS_DEMO_SOURCE_KEY',
  sourceSigningKey: 'ETS_DEMO_SOURCE_SIGNING_KEY',
  facts: 'ETS_DEMO_FACTS',
  sourcePort: 'ETS_DEMO_SOURCE_PORT',
  mcp: 'ETS_DEMO_MCP_SERVER',
} as const;
interface DemoNetwork {
  dns: string;
  cert: string;
  key: string;
  receiverPort: number;
  /** Absent in folders set up before the demo had a source. */
  source?: { cert: string; key: string; signingKey: string; factsFile: string; port: number };
  /** The stdio MCP server of the demo (absent in folders set up before the demo had one). */
  mcp?: string;
}
/** Names in demo.env, also read from the environment. */
const ENV = {
  aliceKey: 'ETS_DEMO_ALICE_KEY',
  aliceStepUp: 'ETS_DEMO_ALICE_STEP_UP',
  bobKey: 'ETS_DEMO_BOB_KEY',
  bobStepUp: 'ETS_DEMO_BOB_STEP_UP',
  agentKey: 'ETS_DEMO_AGENT_KEY',
} as const;
type DemoCredentials = Record<keyof typeof ENV, string>;
const FLAGS: Record<keyof typeof ENV, string> = {
  aliceKey: 'alice-key',
  aliceStepUp: 'alice-step-up',
  bobKey: 'bob-key',
  bobStepUp: 'bob-step-up',
  agentKey: 'agent-key',
};

/**
 * `ets demo`: a guided walk through the service against a running server in sandbox mode:
 * maker-checker governance with a step-up signature, an approved and a refused execution, the
 * service's Verification and Receipt, and offline verification with only the public keys.
 *
 * Keys are operator-managed (no API creates them), so `ets demo --setup DIR`, with the server
 * stopped, adds the three demo callers to the key file, generates the two humans' Ed25519 step-up
 * key pairs into DIR and writes DIR/demo.env, which `ets demo --from DIR` reads once the server
 * (re)started. Exit 0 only when every step went as expected.
 */
export async function demoCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      setup: { type: 'string' },
      'dns-port': { type: 'string' },
      'receiver-port': { type: 'string' },
      'source-port': { type: 'string' },
      from: { type: 'string' },
      url: { type: 'string' },
      'alice-key': { type: 'string' },
      'alice-step-up': { type: 'string' },
      'bob-key': { type: 'string' },
      'bob-step-up': { type: 'string' },
      'agent-key': { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new CliError(`Unexpected argument '${positionals[0]}'.\n${USAGE}`, 2);
  const ports = { dns: values['dns-port'], receiver: values['receiver-port'], source: values['source-port'] };
  if (values.setup !== undefined) {
    const others = Object.keys(values).filter((k) => !['setup', 'dns-port', 'receiver-port', 'source-port'].includes(k));
    if (others.length > 0) throw new CliError(`--setup takes no --${others[0]}.\n${USAGE}`, 2);
    return setup(values.setup, {
      dns: portOption(ports.dns, '--dns-port', 0, USAGE),
      receiver: portOption(ports.receiver, '--receiver-port', 0, USAGE),
      source: portOption(ports.source, '--source-port', 0, USAGE),
    });
  }
  if (Object.values(ports).some((p) => p !== undefined)) throw new CliError(`--dns-port, --receiver-port and --source-port go with --setup.\n${USAGE}`, 2);
  const demoEnv = values.from !== undefined ? readDemoEnv(values.from) : undefined;
  const network = demoEnv ? readNetwork(demoEnv) : undefined;
  const credentials = resolveCredentials(values as Record<string, string | undefined>, demoEnv);
  const baseUrl = values.url ?? defaultBaseUrl();
  let url: URL;
  try {
    url = new URL(baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new CliError(`--url ${baseUrl} is not an http(s) URL.`, 2);
  }
  await new Demo(url.href.replace(/\/+$/, ''), credentials, readStepUpKeys(credentials), network).run();
}

// ---- setup -------------------------------------------------------------------------------------

/** `--setup`'s ports: 0 for the resolver is a free one now; 0 for the receiver and the source, any free one when the demo runs. */
interface DemoPorts {
  dns: number;
  receiver: number;
  source: number;
}

async function setup(dirArg: string, ports: DemoPorts): Promise<void> {
  if (dirArg.trim() === '') throw new CliError(`--setup needs a folder.\n${USAGE}`, 2);
  const dir = path.resolve(dirArg);
  const envFile = path.join(dir, ENV_FILE);
  if (existsSync(envFile)) {
    throw new CliError(`${envFile} exists: the demo is already set up there. Start the server (env $(cat ${path.join(dirArg, SERVER_ENV_FILE)}) npm start) and run: ets demo --from ${dirArg}`, 2);
  }
  const settings = loadSettings();
  if (settings.apiKeysInline !== undefined) {
    throw new CliError('SVC_API_KEYS is set: the server takes its keys from it, not from the key file. Unset it to set up the demo.', 2);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });

  const stepUp = (name: string): { file: string; publicKeyPem: string } => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const file = `${name}-step-up.pem`;
    writeFileAtomic(path.join(dir, file), privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, { mode: 0o600 });
    return { file, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }) as string };
  };
  const alice = stepUp('alice');
  const bob = stepUp('bob');
  const raw = { alice: generateRawKey(), bob: generateRawKey(), agent: generateRawKey() };
  const createdAt = new Date().toISOString();
  const human = (callerId: string, key: string, publicKeyPem: string): ApiKeyRecord => ({
    callerId,
    keyHash: hashKey(key),
    credentialHolderType: 'USER',
    allowedCapabilities: [],
    allowedTenantIds: [],
    stepUpPublicKey: publicKeyPem,
    createdAt,
  });
  const file = new ApiKeyFile(settings.apiKeysFile);
  const firstKeys = !file.exists();
  file.write([
    ...file.read(),
    human(CALLERS.alice, raw.alice, alice.publicKeyPem),
    human(CALLERS.bob, raw.bob, bob.publicKeyPem),
    {
      callerId: CALLERS.agent,
      keyHash: hashKey(raw.agent),
      credentialHolderType: 'SERVICE',
      allowedCapabilities: ['sandbox:echo', EXTERNAL_CAPABILITY, MCP_CAPABILITY],
      allowedTenantIds: [DEMO_TENANT],
      createdAt,
    },
  ]);
  // The world of the external connector and the business signal source, all on loopback (what
  // `ets local-network` makes): a CA the server trusts (NODE_EXTRA_CA_CERTS), the receiver's and
  // the source's certificates from it, and a resolver port for `ets demo --from` to answer on.
  const dns = `127.0.0.1:${ports.dns || (await freeUdpPort())}`;
  const network = await writeLocalNetwork(dir, [RECEIVER_HOST, SOURCE_HOST], dns);
  const relative = (file: string) => path.relative(dir, file);
  const sourceSigning = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  writeFileAtomic(path.join(dir, 'source-signing-key.pem'), sourceSigning, { mode: 0o600 });
  // The stdio MCP server the gateway may start: this install's demo upstream, run by this Node.
  const upstream = fileURLToPath(new URL('./demo-mcp-upstream.js', import.meta.url));
  writeFileSync(path.join(dir, MCP_SERVERS_FILE), JSON.stringify({ [MCP_SERVER]: { command: process.execPath, args: [upstream] } }, null, 2) + '\n', { mode: 0o644 });
  writeFileSync(path.join(dir, 'facts.json'), JSON.stringify({ 'invoice.amount': { [INVOICE.id]: INVOICE.amount } }, null, 2) + '\n', { mode: 0o644 });
  const env = [
    '# Written by `ets demo --setup`: the raw API keys of the demo callers and their step-up keys.',
    '# Keep this folder private; remove the demo-* callers (ets keys remove) and this folder after the demo.',
    `${ENV.aliceKey}=${raw.alice}`,
    `${ENV.aliceStepUp}=${alice.file}`,
    `${ENV.bobKey}=${raw.bob}`,
    `${ENV.bobStepUp}=${bob.file}`,
    `${ENV.agentKey}=${raw.agent}`,
    `${NETWORK_ENV.dns}=${dns}`,
    `${NETWORK_ENV.cert}=${relative(certificateFiles(dir, RECEIVER_HOST).cert)}`,
    `${NETWORK_ENV.key}=${relative(certificateFiles(dir, RECEIVER_HOST).key)}`,
    `${NETWORK_ENV.receiverPort}=${ports.receiver}`,
    `${NETWORK_ENV.sourceCert}=${relative(certificateFiles(dir, SOURCE_HOST).cert)}`,
    `${NETWORK_ENV.sourceKey}=${relative(certificateFiles(dir, SOURCE_HOST).key)}`,
    `${NETWORK_ENV.sourceSigningKey}=source-signing-key.pem`,
    `${NETWORK_ENV.facts}=facts.json`,
    `${NETWORK_ENV.sourcePort}=${ports.source}`,
    `${NETWORK_ENV.mcp}=${MCP_SERVER}`,
    '',
  ].join('\n');
  writeFileAtomic(envFile, env, { mode: 0o600 });
  // No comments: `env $(cat DIR/server.env) npm start` takes it as it is.
  const serverEnv = { SVC_SANDBOX: 'true', ...network.serverEnv, SVC_MCP_STDIO_SERVERS: path.join(dir, MCP_SERVERS_FILE) };
  writeFileSync(path.join(dir, SERVER_ENV_FILE), Object.entries(serverEnv).map(([k, v]) => `${k}=${v}\n`).join(''), { mode: 0o644 });
  const port = (p: number) => (p === 0 ? 'any free port' : `port ${p}`);
  process.stdout.write(
    [
      `Added the demo callers ${CALLERS.alice} and ${CALLERS.bob} (USER, with step-up keys) and ${CALLERS.agent} (SERVICE, sandbox:echo and ${EXTERNAL_CAPABILITY}) to ${file.file}.`,
      `Wrote their keys to ${envFile} and the step-up private keys to ${path.join(dir, alice.file)} and ${path.join(dir, bob.file)}.`,
      `Wrote a demo CA, the certificates of the example receiver (${RECEIVER_HOST}, ${port(ports.receiver)}) and of the business signal source (${SOURCE_HOST}, ${port(ports.source)}),`,
      `the source's signing key and facts (facts.json), and the server's demo settings to ${path.join(dir, SERVER_ENV_FILE)}:`,
      `sandbox mode, the demo's resolver (${dns}, answered while the demo runs), 127.0.0.0/8 allowed for outbound calls, the demo CA trusted,`,
      `and the demo's upstream MCP server ${MCP_SERVER} (a stdio server, ${path.join(dir, MCP_SERVERS_FILE)}).`,
      ...(firstKeys ? ['The key file was empty: the first start will not issue a key of its own; use `ets keys add` for more.'] : []),
      'Next: (re)start the server with these settings, since keys are read at start, and run the demo',
      '(the second command in another terminal, in the clone; --url URL if the server is not at SVC_HOST:SVC_PORT of that terminal):',
      `  env $(cat ${path.join(dirArg, SERVER_ENV_FILE)}) npm start`,
      `  npx ets demo --from ${path.resolve(dirArg)}`,
      '',
    ].join('\n'),
  );
}

// ---- credentials ---------------------------------------------------------------------------------

/** DIR/demo.env of --from, with the folder its relative paths are in. */
interface DemoEnv {
  dir: string;
  values: Record<string, string>;
}

function readDemoEnv(dirArg: string): DemoEnv {
  const dir = path.resolve(dirArg);
  const envFile = path.join(dir, ENV_FILE);
  try {
    return { dir, values: parseDotenv(readFileSync(envFile, 'utf8')) };
  } catch (e) {
    throw new CliError(`cannot read ${envFile}: ${codeOrMessage(e)}. Run 'ets demo --setup ${dirArg}' first (server stopped).`, 2);
  }
}

/** Flags first, then DIR/demo.env of --from, then ETS_DEMO_* in the environment. */
function resolveCredentials(values: Record<string, string | undefined>, demoEnv: DemoEnv | undefined): DemoCredentials {
  const fromFile = demoEnv?.values ?? {};
  const fromDir = demoEnv?.dir;
  const out: Partial<DemoCredentials> = {};
  const missing: string[] = [];
  for (const name of Object.keys(ENV) as (keyof typeof ENV)[]) {
    const flag = values[FLAGS[name]];
    let value = flag ?? fromFile[ENV[name]] ?? process.env[ENV[name]];
    // Step-up key paths in demo.env are relative to its folder.
    if (flag === undefined && fromFile[ENV[name]] !== undefined && name.endsWith('StepUp') && fromDir) value = path.resolve(fromDir, fromFile[ENV[name]]!);
    if (value === undefined || value.trim() === '') missing.push(`--${FLAGS[name]}`);
    else out[name] = value.trim();
  }
  if (missing.length > 0) {
    throw new CliError(`missing ${missing.join(', ')} (or --from DIR written by 'ets demo --setup DIR').\n${USAGE}`, 2);
  }
  return out as DemoCredentials;
}

function readStepUpKeys(c: DemoCredentials): { alice: string; bob: string } {
  const read = (file: string, flag: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch (e) {
      throw new CliError(`cannot read the step-up key ${file} (--${flag}): ${codeOrMessage(e)}`, 2);
    }
  };
  return { alice: read(c.aliceStepUp, FLAGS.aliceStepUp), bob: read(c.bobStepUp, FLAGS.bobStepUp) };
}

/** The demo network of a folder set up by `--setup` (absent in folders set up before it existed). */
function readNetwork({ dir, values }: DemoEnv): DemoNetwork | undefined {
  const dns = values[NETWORK_ENV.dns];
  const cert = values[NETWORK_ENV.cert];
  const key = values[NETWORK_ENV.key];
  if (!dns || !cert || !key) return undefined;
  const read = (file: string) => readFileSync(path.resolve(dir, file), 'utf8');
  const port = (name: string) => Number(values[name] ?? '0') || 0;
  try {
    const network: DemoNetwork = { dns, cert: read(cert), key: read(key), receiverPort: port(NETWORK_ENV.receiverPort), ...(values[NETWORK_ENV.mcp] ? { mcp: values[NETWORK_ENV.mcp] } : {}) };
    const [sourceCert, sourceKey, signingKey, facts] = [NETWORK_ENV.sourceCert, NETWORK_ENV.sourceKey, NETWORK_ENV.sourceSigningKey, NETWORK_ENV.facts].map((n) => values[n]);
    if (sourceCert && sourceKey && signingKey && facts) {
      network.source = { cert: read(sourceCert), key: read(sourceKey), signingKey: read(signingKey), factsFile: path.resolve(dir, facts), port: port(NETWORK_ENV.sourcePort) };
    }
    return network;
  } catch (e) {
    throw new CliError(`cannot read the demo's certificates and keys in ${dir}: ${codeOrMessage(e)}`, 2);
  }
}

function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      const { port } = socket.address();
      socket.close(() => resolve(port));
    });
  });
}

function defaultBaseUrl(): string {
  const { host, port } = loadSettings();
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' || host === '[::]' ? '::1' : host;
  return `http://${reachable.includes(':') && !reachable.startsWith('[') ? `[${reachable}]` : reachable}:${port}`;
}

// ---- the walk ------------------------------------------------------------------------------------

type Json = Record<string, unknown>;
interface Reply {
  status: number;
  body: unknown;
}

/** A step did not go as expected: what was expected and what came back. */
class StepFailed extends Error {
  constructor(
    readonly expected: string,
    readonly got: string,
  ) {
    super(expected);
  }
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const field = (v: unknown, name: string): unknown => (isObject(v) ? v[name] : undefined);
const short = (value: unknown, max = 110): string => {
  const text = typeof value === 'string' ? value : JSON.stringify(value) ?? '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
};
const replyText = (r: Reply): string => `${r.status} ${short(r.body, 300)}`;

function expectReply(r: Reply, status: number, what: string, ok: (body: unknown) => boolean = () => true): Json {
  if (r.status !== status || !ok(r.body)) throw new StepFailed(`${status} ${what}`, replyText(r));
  return (isObject(r.body) ? r.body : {}) as Json;
}

export const DEMO_STEP_TITLES = [
  'The server is up and knows the demo callers',
  'Alice proposes a new version of the demo policy',
  'Bob approves it with his step-up signature (Alice may not approve her own change)',
  'The new version is in effect',
  'The agent executes an approved sandbox action',
  'The agent is refused; the signed Refusal Record verifies publicly',
  'Alice registers an external connector for demopay:transfer; Bob approves it',
  'The agent executes demopay:transfer: a signed release to the example receiver over HTTPS',
  'Alice registers a business signal source and a policy that relies on it; Bob approves both',
  'The agent pays an invoice whose amount the source vouches for; another amount is refused',
  'An agent calls a tool through the MCP gateway: approved, refused, and held until Bob approves it',
  'The service verifies the Execution Trust Record',
  'The service issues a signed Receipt',
  'Anyone verifies the records offline, with only the public keys',
] as const;

class Demo {
  readonly #version = `1.0.${Date.now()}`;
  #proposal?: Json;
  #executedId?: string;
  #trustRecord?: Json;
  #refusal?: Json;
  #receipt?: Json;
  #sourcedRecord?: Json;

  #dns?: LoopbackDns;
  #receiver?: ExampleReceiver;
  #source?: RunningReferenceSource;

  constructor(
    readonly baseUrl: string,
    readonly keys: DemoCredentials,
    readonly stepUp: { alice: string; bob: string },
    readonly network?: DemoNetwork,
  ) {}

  async run(): Promise<void> {
    process.stdout.write(`ets demo against ${this.baseUrl}\n`);
    const steps: (() => Promise<void>)[] = [
      () => this.preflight(),
      () => this.propose(),
      () => this.approve(),
      () => this.inEffect(),
      () => this.execute(),
      () => this.refuse(),
      () => this.registerConnector(),
      () => this.releaseExternally(),
      () => this.registerSource(),
      () => this.executeSourced(),
      () => this.mcpGateway(),
      () => this.verify(),
      () => this.receipt(),
      () => this.offline(),
    ];
    try {
      for (const [i, step] of steps.entries()) {
        process.stdout.write(`\n${i}. ${DEMO_STEP_TITLES[i]}\n`);
        try {
          await step();
        } catch (e) {
          if (!(e instanceof StepFailed)) throw e;
          process.stdout.write(`   ✗ expected: ${e.expected}\n     got:      ${e.got}\n`);
          throw new CliError(`demo failed at step ${i} (${DEMO_STEP_TITLES[i]}).`, 1);
        }
      }
    } finally {
      await this.#receiver?.close();
      await this.#source?.close();
      await this.#dns?.close();
    }
    process.stdout.write('\nEvery step went as expected.\n');
  }

  /** `as`: which demo caller's key authenticates the request; none for the public routes. */
  async #call(method: 'GET' | 'POST', route: string, as: keyof typeof CALLERS | undefined, body?: unknown): Promise<Reply> {
    const key = as === undefined ? undefined : { alice: this.keys.aliceKey, bob: this.keys.bobKey, agent: this.keys.agentKey }[as];
    process.stdout.write(`   → ${method} ${route}${body !== undefined ? ` ${short(body)}` : ''}  (${as === undefined ? 'no credential' : `as ${CALLERS[as]}`})\n`);
    let res: Response;
    try {
      res = await fetch(this.baseUrl + route, {
        method,
        headers: {
          accept: 'application/json',
          ...(key ? { authorization: `Bearer ${key}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      const cause = fetchProblem(e);
      throw new StepFailed(`an answer from ${this.baseUrl}`, `no answer (${cause}): is the server running? (env $(cat DIR/${SERVER_ENV_FILE}) npm start)`);
    }
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      // not JSON: shown as text
    }
    const reply = { status: res.status, body: parsed };
    process.stdout.write(`   ← ${replyText({ status: reply.status, body: short(parsed, 110) })}\n`);
    return reply;
  }

  #result(text: string): void {
    process.stdout.write(`   ✓ ${text}\n`);
  }

  async preflight(): Promise<void> {
    expectReply(await this.#call('GET', '/health', undefined), 200, '{"status":"UP"}', (b) => field(b, 'status') === 'UP');
    for (const name of ['alice', 'bob', 'agent'] as const) {
      const r = await this.#call('GET', '/callers/me', name);
      if (r.status === 401) {
        throw new StepFailed(`200 for the ${name} key`, `${replyText(r)}: the server does not know this key. Keys are read at start: restart the server after 'ets demo --setup'.`);
      }
      const me = expectReply(r, 200, `the ${name} caller`);
      if (name !== 'agent' && (me.credentialHolderType !== 'USER' || me.stepUpKeyRegistered !== true)) {
        throw new StepFailed(`a USER key with a registered step-up key for ${name}`, replyText(r));
      }
    }
    this.#result('the server answers and knows both humans (USER keys with step-up keys) and the agent');
  }

  policyDocument(): Json {
    return {
      name: DEMO_POLICY,
      policyVersion: this.#version,
      description: `ets demo policy, version ${this.#version}: refuse sanctioned countries and amounts above 10000.`,
      signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
      rules: [
        { id: 'sanctioned', when: "has(signals.country) && signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
        { id: 'limit', when: 'has(signals.amount) && signals.amount > 10000', action: 'reject', reason: 'Amount above the demo limit of 10000' },
        { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
      ],
      default: { action: 'reject', reason: 'No rule matched' },
    };
  }

  async propose(): Promise<void> {
    const { change, replaces } = await this.#proposePolicy(this.policyDocument(), 'ets demo: refuse sanctioned countries and large amounts');
    this.#proposal = change;
    this.#result(`change ${String(change.id)} proposes ${DEMO_POLICY} ${this.#version}${replaces ? ` to replace ${replaces}` : ''}: PENDING_APPROVAL, proposer ${CALLERS.alice}`);
  }

  /** Alice proposes `document` (a new version of its policy); returns the pending change and the version it replaces. */
  async #proposePolicy(document: Json, reason: string): Promise<{ change: Json; replaces?: string }> {
    const name = String(document.name);
    const inEffect = await this.#call('GET', '/policies/in-effect', 'alice');
    if (inEffect.status !== 200 || !Array.isArray(inEffect.body)) throw new StepFailed('200 with the list of policies in effect', replyText(inEffect));
    const current: unknown = (inEffect.body as unknown[]).find((p) => field(p, 'name') === name);
    // The version it replaces, or its own version for a first one.
    const replaces = typeof field(current, 'version') === 'string' ? (field(current, 'version') as string) : undefined;
    const r = await this.#call('POST', `/policies/${name}/${encodeURIComponent(replaces ?? this.#version)}/pending-changes`, 'alice', { proposedContent: document, reason });
    const change = expectReply(r, 201, `a pending change with status PENDING_APPROVAL proposed by ${CALLERS.alice}`, (b) => field(b, 'status') === 'PENDING_APPROVAL' && field(b, 'proposer') === CALLERS.alice && typeof field(b, 'id') === 'string');
    return { change, replaces };
  }

  envelope(callerId: string, privateKeyPem: string, changeId = String(this.#proposal!.id)): Json {
    try {
      return stepUpEnvelope(privateKeyPem, { change: changeId, action: 'approve', callerId }) as unknown as Json;
    } catch (e) {
      throw new CliError(`the step-up key of ${callerId}: ${(e as Error).message}`, 2);
    }
  }

  async approve(): Promise<void> {
    const id = String(this.#proposal!.id);
    const route = `/policies/pending-changes/${encodeURIComponent(id)}/approve`;
    const self = await this.#call('POST', route, 'alice', this.envelope(CALLERS.alice, this.stepUp.alice));
    expectReply(self, 403, 'SELF_APPROVAL_DENIED: the proposer may not approve', (b) => field(b, 'code') === 'SELF_APPROVAL_DENIED');
    this.#result('Alice, the proposer, is refused: 403 SELF_APPROVAL_DENIED');
    const r = await this.#call('POST', route, 'bob', this.envelope(CALLERS.bob, this.stepUp.bob));
    const change = expectReply(r, 200, `the change APPROVED by ${CALLERS.bob}`, (b) => field(b, 'status') === 'APPROVED' && field(b, 'decider') === CALLERS.bob);
    this.#result(`Bob's envelope (Ed25519 over the canonical payload, single-use nonce) is accepted: ${String(change.status)}, decider ${String(change.decider)}`);
  }

  async inEffect(): Promise<void> {
    const r = await this.#call('GET', '/policies/in-effect', 'alice');
    const list = Array.isArray(r.body) ? (r.body as unknown[]) : [];
    const entry = list.find((p) => field(p, 'name') === DEMO_POLICY);
    if (r.status !== 200 || field(entry, 'version') !== this.#version) {
      throw new StepFailed(`200 listing ${DEMO_POLICY} version ${this.#version}`, replyText(r));
    }
    this.#result(`${DEMO_POLICY} ${this.#version} is in effect, approved by ${String(field(entry, 'approvedBy'))}, contentHash ${short(field(entry, 'contentHash'), 20)}`);
  }

  transaction(signals: Json, reference: string, action = 'sandbox:echo', policy = DEMO_POLICY, parameters: Json = { amount: signals.amount, currency: 'EUR', reference }): Json {
    return {
      businessTransactionId: randomUUID(),
      metadata: { tenantId: DEMO_TENANT },
      authority: { principalId: CALLERS.agent, authorityId: 'demo-authority' },
      authorization: { authorityId: 'demo-authority' },
      intent: { action, parameters },
      policy: { name: policy, version: this.#version },
      signals,
    };
  }

  async execute(): Promise<void> {
    const tx = this.transaction({ amount: 250, country: 'FR' }, 'demo-invoice-1');
    const r = await this.#call('POST', '/execute', 'agent', tx);
    const body = expectReply(r, 200, 'EXECUTED with a signed Execution Trust Record', (b) => field(b, 'executionStatus') === 'EXECUTED' && isObject(field(b, 'trustRecord')));
    this.#executedId = String(tx.businessTransactionId);
    this.#trustRecord = body.trustRecord as Json;
    const exec = (Array.isArray(this.#trustRecord.executions) ? this.#trustRecord.executions[0] : undefined) as Json | undefined;
    this.#result(`EXECUTED by the sandbox connector; Trust Record signed by ${String(this.#trustRecord.keyId)}, chainHash ${short(exec?.chainHash, 20)}`);
  }

  async refuse(): Promise<void> {
    const tx = this.transaction({ amount: 250, country: 'KP' }, 'demo-invoice-2');
    const r = await this.#call('POST', '/execute', 'agent', tx);
    expectReply(r, 403, 'POLICY_DENIED', (b) => field(b, 'code') === 'POLICY_DENIED');
    this.#result(`refused: ${String(field(r.body, 'error'))}`);
    const id = String(tx.businessTransactionId);
    const got = await this.#call('GET', `/refusal/${id}`, 'agent');
    this.#refusal = expectReply(got, 200, 'the signed Refusal Record', (b) => field(b, 'recordType') === 'refusal-record');
    const check = await this.#call('POST', '/refusal/verify', undefined, this.#refusal);
    expectReply(check, 200, '{"valid": true}', (b) => field(b, 'valid') === true);
    this.#result(`the Refusal Record (rule ${String(this.#refusal.matchedRuleId)}) verifies through the public route, key ${String(field(check.body, 'keyId'))}`);
  }

  /**
   * A maker-checker change of a governed registry (`/external-connectors`, `/business-signal-sources`):
   * Alice proposes, Bob approves. Returns the approved change.
   */
  async #governedChange(registry: string, body: Json, what: string): Promise<Json> {
    const r = await this.#call('POST', `${registry}/changes`, 'alice', body);
    if (r.status === 400 && /^endpoint/.test(String(field(r.body, 'error')))) {
      throw new StepFailed(`201: the server resolves the ${what} through the demo resolver`, `${replyText(r)}: start the server with the demo settings (env $(cat DIR/${SERVER_ENV_FILE}) npm start)`);
    }
    const proposed = expectReply(r, 201, `a ${String(body.kind)} change PENDING_APPROVAL`, (b) => field(b, 'status') === 'PENDING_APPROVAL');
    const id = String(proposed.id);
    const approved = await this.#call('POST', `${registry}/changes/${encodeURIComponent(id)}/approve`, 'bob', this.envelope(CALLERS.bob, this.stepUp.bob, id));
    return expectReply(approved, 200, `the ${String(body.kind)} change APPROVED by ${CALLERS.bob}`, (b) => field(b, 'status') === 'APPROVED');
  }

  /** Revokes what an earlier run registered under `key` = `value` (its endpoint is gone with that run). */
  async #revokeEarlier(registry: string, key: string, value: string): Promise<void> {
    const active = await this.#call('GET', `${registry}?pageSize=100`, 'alice');
    const items = field(expectReply(active, 200, 'the active registrations', (b) => Array.isArray(field(b, 'items'))), 'items') as unknown[];
    if (items.some((r) => field(r, key) === value)) {
      await this.#governedChange(registry, { kind: 'revoke', [key]: value, reason: 'ets demo: the endpoint of an earlier run is gone' }, value);
      this.#result(`the registration of an earlier run is revoked`);
    }
  }

  /** The demo's resolver, started at the first step that needs it and answering for the names the demo serves. */
  async #resolver(network: DemoNetwork): Promise<LoopbackDns> {
    if (!this.#dns) {
      try {
        this.#dns = await startResolver(network.dns, [], '127.0.0.1');
      } catch (e) {
        throw new StepFailed(`the demo resolver listening on ${network.dns}`, `${(e as Error).message}: is another demo running?`);
      }
    }
    return this.#dns;
  }

  async registerConnector(): Promise<void> {
    if (!this.network) {
      process.stdout.write(`   – skipped: the demo folder has no receiver certificate or resolver (set up before they existed); run 'ets demo --setup' in a new folder.\n`);
      return;
    }
    const jwksUrl = `${this.baseUrl}/.well-known/jwks.json`;
    const dns = await this.#resolver(this.network);
    try {
      this.#receiver = await startExampleReceiver({ tls: { cert: this.network.cert, key: this.network.key }, hostName: RECEIVER_HOST, jwks: jwksUrl, port: this.network.receiverPort });
    } catch (e) {
      throw new StepFailed(`the example receiver listening on 127.0.0.1:${this.network.receiverPort}`, `${codeOrMessage(e)}: is another demo running?`);
    }
    dns.set(RECEIVER_HOST, { A: [this.#receiver.address] });
    process.stdout.write(`   (the example receiver of packages/release-receiver listens at ${this.#receiver.endpoint}, verifying releases with ${jwksUrl};\n    the demo's resolver ${this.network.dns} answers ${RECEIVER_HOST} → ${this.#receiver.address})\n`);

    await this.#revokeEarlier('/external-connectors', 'capability', EXTERNAL_CAPABILITY);
    const approved = await this.#governedChange('/external-connectors', {
      kind: 'register',
      capability: EXTERNAL_CAPABILITY,
      endpoint: this.#receiver.endpoint,
      policyName: DEMO_POLICY,
      forwardedParameters: ['amount', 'currency', 'reference'],
      timeoutMs: 5000,
      reason: 'ets demo: release demo payments to the example receiver',
    }, 'receiver');
    const id = String(approved.id);
    this.#result(`${EXTERNAL_CAPABILITY} is registered (registrationId ${id}) to ${this.#receiver.endpoint}, forwarding amount, currency and reference only`);
  }

  async releaseExternally(): Promise<void> {
    if (!this.#receiver) {
      process.stdout.write('   – skipped: no external connector was registered.\n');
      return;
    }
    const tx = this.transaction({ amount: 420, country: 'FR' }, 'demo-invoice-3', EXTERNAL_CAPABILITY);
    (tx.intent as Json).parameters = { ...((tx.intent as Json).parameters as Json), internalNote: 'never forwarded' };
    const r = await this.#call('POST', '/execute', 'agent', tx);
    expectReply(r, 200, 'EXECUTED by the external receiver', (b) => field(b, 'executionStatus') === 'EXECUTED');
    const release = this.#receiver.executed.find((x) => x.businessTransactionId === tx.businessTransactionId);
    if (!release || this.#receiver.executed.filter((x) => x.businessTransactionId === tx.businessTransactionId).length !== 1) {
      throw new StepFailed('the receiver acted on exactly one release', `${this.#receiver.executed.length} releases received`);
    }
    process.stdout.write(`   (the receiver verified: kid ${release.kid}, aud ${release.aud}, expires ${(Math.round((release.exp - release.iat) * 1000) / 1000).toString()}s after issue, jti ${release.jti}, parameters ${short(release.parameters)})\n`);
    this.#result(`EXECUTED by the receiver over HTTPS; result ${short(field(r.body, 'result'), 90)}`);
  }

  /** The policy of the sourced step: the invoice's amount is the source's, and must be the amount paid. */
  sourcedPolicyDocument(): Json {
    return {
      name: SOURCED_POLICY,
      policyVersion: this.#version,
      description: `ets demo policy, version ${this.#version}: the invoice amount comes from the source ${SOURCE_NAME} and must be the amount paid.`,
      signalsSchema: { invoiceAmount: { type: 'number' } },
      signalSources: { invoiceAmount: { source: SOURCE_NAME, fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' } },
      boundSignals: { invoiceAmount: 'intent.parameters.amount' },
      rules: [{ id: 'ok', when: 'signals.invoiceAmount <= 10000', action: 'approve', reason: 'Invoice within the demo limit' }],
      default: { action: 'reject', reason: 'Invoice above the demo limit of 10000' },
    };
  }

  async registerSource(): Promise<void> {
    const source = this.network?.source;
    if (!this.network || !source) {
      process.stdout.write(`   – skipped: the demo folder has no source certificate (set up before the demo had one); run 'ets demo --setup' in a new folder.\n`);
      return;
    }
    const dns = await this.#resolver(this.network);
    let signing;
    try {
      signing = readSigningKey(source.signingKey);
    } catch (e) {
      throw new CliError(`the demo source's signing key: ${(e as Error).message}`, 2);
    }
    try {
      this.#source = await startReferenceSource({ factsFile: source.factsFile, key: signing, tls: { cert: source.cert, key: source.key }, host: '127.0.0.1', port: source.port });
    } catch (e) {
      throw new StepFailed(`the demo source listening on 127.0.0.1:${source.port}`, `${codeOrMessage(e)}: is another demo running?`);
    }
    dns.set(SOURCE_HOST, { A: [this.#source.address] });
    const endpoint = `https://${SOURCE_HOST}:${this.#source.port}/facts`;
    process.stdout.write(`   (the reference source of 'ets source serve' listens at ${endpoint}, answering from ${source.factsFile} and signing with ${signing.keyId})\n`);
    await this.#revokeEarlier('/business-signal-sources', 'name', SOURCE_NAME);
    await this.#governedChange('/business-signal-sources', { kind: 'register', name: SOURCE_NAME, endpoint, publicKey: signing.publicKeyPem, reason: 'ets demo: invoice amounts' }, 'source');
    this.#result(`the source ${SOURCE_NAME} is registered at ${endpoint} with its Ed25519 public key`);
    const { change } = await this.#proposePolicy(this.sourcedPolicyDocument(), 'ets demo: pay invoices at the amount the source vouches for');
    const id = String(change.id);
    const approved = await this.#call('POST', `/policies/pending-changes/${encodeURIComponent(id)}/approve`, 'bob', this.envelope(CALLERS.bob, this.stepUp.bob, id));
    expectReply(approved, 200, `the change APPROVED by ${CALLERS.bob}`, (b) => field(b, 'status') === 'APPROVED');
    this.#result(`${SOURCED_POLICY} ${this.#version} is in effect: invoiceAmount is asked of ${SOURCE_NAME} and bound to intent.parameters.amount`);
  }

  async executeSourced(): Promise<void> {
    if (!this.#source) {
      process.stdout.write('   – skipped: no business signal source was registered.\n');
      return;
    }
    const pay = (amount: number) => this.transaction({}, 'demo-invoice-4', 'sandbox:echo', SOURCED_POLICY, { invoiceId: INVOICE.id, amount, currency: 'EUR' });
    const r = await this.#call('POST', '/execute', 'agent', pay(INVOICE.amount));
    const body = expectReply(r, 200, 'EXECUTED on the amount the source vouches for', (b) => field(b, 'executionStatus') === 'EXECUTED' && isObject(field(b, 'trustRecord')));
    this.#sourcedRecord = body.trustRecord as Json;
    const sourced = field(field(this.#sourcedRecord.assessment, 'businessValidation'), 'sourcedSignals');
    const signal = Array.isArray(sourced) ? (sourced[0] as unknown) : undefined;
    if (field(signal, 'value') !== INVOICE.amount || field(signal, 'sourceProofVerified') !== true) {
      throw new StepFailed(`a Trusted Signal invoiceAmount = ${INVOICE.amount} with a verified proof of ${SOURCE_NAME}`, short(sourced, 300));
    }
    this.#result(`EXECUTED; the record holds the Trusted Signal invoiceAmount = ${INVOICE.amount} from ${SOURCE_NAME}, its proof verified (sourceKeyId ${short(field(signal, 'sourceKeyId'), 24)})`);
    const other = pay(INVOICE.amount * 10);
    const refused = await this.#call('POST', '/execute', 'agent', other);
    expectReply(refused, 403, 'POLICY_DENIED', (b) => field(b, 'code') === 'POLICY_DENIED');
    const refusal = await this.#call('GET', `/refusal/${String(other.businessTransactionId)}`, 'agent');
    const record = expectReply(refusal, 200, 'the signed Refusal Record', (b) => field(b, 'recordType') === 'refusal-record');
    if (record.matchedRuleId !== 'bound-signal-mismatch') throw new StepFailed('a refusal with matchedRuleId bound-signal-mismatch', replyText(refusal));
    this.#result(`${INVOICE.amount * 10} for the same invoice is refused: bound-signal-mismatch (the source says ${INVOICE.amount})`);
  }

  /** The policy of the MCP step: transfers above 10000 refused, above 1000 held for a human, the rest approved. */
  mcpPolicyDocument(): Json {
    return {
      name: MCP_POLICY,
      policyVersion: this.#version,
      description: `ets demo policy, version ${this.#version}: the demo bank's transfers through the MCP gateway.`,
      signalsSchema: { amount: { type: 'number' }, payee: { type: 'string' } },
      rules: [
        { id: 'too-large', when: 'signals.amount > 10000', action: 'reject', reason: 'Transfers above 10000 are not for agents' },
        { id: 'second-look', when: 'signals.amount > 1000', action: 'approve', requires_override: true, reason: 'Transfers above 1000 need a human' },
        { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
      ],
      default: { action: 'reject', reason: 'No rule matched' },
    };
  }

  /**
   * An agent with the official MCP SDK client, pointed at `/mcp` with its key: three calls of the
   * demo bank's tool. The held one waits on the agent's side while Bob, as a human would with
   * `ets overrides list` and `ets overrides approve`, finds it and approves it; then it returns.
   */
  async mcpGateway(): Promise<void> {
    if (!this.network?.mcp) {
      process.stdout.write(`   – skipped: the demo folder names no MCP server (set up before the demo had one); run 'ets demo --setup' in a new folder.\n`);
      return;
    }
    const { change } = await this.#proposePolicy(this.mcpPolicyDocument(), 'ets demo: decide the demo bank tool calls');
    const id = String(change.id);
    const approved = await this.#call('POST', `/policies/pending-changes/${encodeURIComponent(id)}/approve`, 'bob', this.envelope(CALLERS.bob, this.stepUp.bob, id));
    expectReply(approved, 200, `the change APPROVED by ${CALLERS.bob}`, (b) => field(b, 'status') === 'APPROVED');
    await this.#revokeEarlier('/mcp-servers', 'name', MCP_SERVER);
    await this.#governedChange('/mcp-servers', { kind: 'register', name: MCP_SERVER, stdio: this.network.mcp, policyName: MCP_POLICY, tools: ['*'], timeoutMs: 10000, reason: 'ets demo: agents pay through the demo bank' }, 'MCP server');
    this.#result(`${MCP_POLICY} ${this.#version} is in effect, and the stdio server ${MCP_SERVER} is registered behind the gateway`);

    const agent = new Client({ name: 'ets-demo-agent', version: '1.0.0' });
    process.stdout.write(`   (the agent: the MCP SDK's Client over Streamable HTTP to ${this.baseUrl}/mcp, "Authorization: Bearer <its key>")\n`);
    try {
      await agent.connect(new StreamableHTTPClientTransport(new URL(`${this.baseUrl}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${this.keys.agentKey}` } } }));
    } catch (e) {
      throw new StepFailed('the agent connected to the gateway', (e as Error).message);
    }
    try {
      const until = Date.now() + 30_000;
      let tools: string[] = [];
      // The gateway asks the newly registered server for its tools on the first listing after it is approved.
      while (!tools.includes(MCP_TOOL) && Date.now() < until) {
        tools = (await agent.listTools()).tools.map((t) => t.name);
        if (!tools.includes(MCP_TOOL)) await new Promise((r) => setTimeout(r, 300));
      }
      if (!tools.includes(MCP_TOOL)) throw new StepFailed(`tools/list naming ${MCP_TOOL}`, JSON.stringify(tools));
      this.#result(`tools/list offers the agent ${tools.join(', ')}`);

      type ToolResult = { isError?: boolean; content?: { type: string; text?: string }[]; _meta?: Record<string, unknown> };
      const call = async (amount: number, options: { onprogress?: (p: { message?: string }) => void } = {}): Promise<ToolResult> => {
        const args = { amount, payee: 'Acme Supplies' };
        process.stdout.write(`   → tools/call ${MCP_TOOL} ${JSON.stringify(args)}  (as ${CALLERS.agent})\n`);
        const result = (await agent.callTool({ name: MCP_TOOL, arguments: args }, undefined, { timeout: 150_000, ...(options.onprogress ? { onprogress: options.onprogress, resetTimeoutOnProgress: true } : {}) })) as ToolResult;
        const text = result.content?.find((c) => c.type === 'text')?.text ?? '';
        process.stdout.write(`   ← ${result.isError ? 'isError: ' : ''}${short(text, 80)}  _meta ${short(result._meta ?? {}, 100)}\n`);
        return result;
      };

      const ok = await call(250);
      const record = field(ok._meta, 'ets/trustRecord');
      if (ok.isError || typeof field(record, 'businessTransactionId') !== 'string') throw new StepFailed('the upstream\'s result with _meta["ets/trustRecord"]', short(ok, 300));
      this.#result(`approved by the policy: the upstream ran it; its Trust Record is at ${String(field(record, 'verifyUrl'))}`);

      const no = await call(50_000);
      if (!no.isError || typeof field(field(no._meta, 'ets/refusal'), 'businessTransactionId') !== 'string') throw new StepFailed('isError with _meta["ets/refusal"]', short(no, 300));
      this.#result('refused by the policy (too-large): nothing reached the upstream; a signed Refusal Record');

      // The held call: the agent waits (progress notifications name the transaction) while Bob decides.
      let heldId: ((id: string) => void) | undefined;
      const named = new Promise<string>((resolve) => (heldId = resolve));
      const waiting = call(5000, {
        onprogress: (p) => {
          const m = /business transaction ([0-9a-f-]{36})/.exec(p.message ?? '');
          if (m) heldId?.(m[1]!);
        },
      });
      const id = await Promise.race([named, waiting.then(() => undefined)]);
      if (id === undefined) throw new StepFailed('the call held for a human, with progress naming its transaction', short(await waiting, 300));
      process.stdout.write(`   (the agent's call waits; its progress says: held for a human approval, business transaction ${id})\n`);
      const listed = await this.#call('GET', '/overrides?status=PENDING&pageSize=100', 'bob');
      const items = field(expectReply(listed, 200, 'the pending held transactions', (b) => Array.isArray(field(b, 'items'))), 'items') as unknown[];
      const held = items.find((h) => field(h, 'businessTransactionId') === id);
      if (!held) throw new StepFailed(`${id} among the PENDING held transactions`, short(items.map((h) => field(h, 'businessTransactionId')), 300));
      this.#result(`Bob sees it held (what \`ets overrides list\` prints): ${String(field(held, 'action'))}, ${short(field(held, 'parameters'))}, "${String(field(field(held, 'decision'), 'reason'))}"`);
      process.stdout.write(`   → ets overrides approve ${id} --key bob-step-up.pem  (as ${CALLERS.bob}: the approval of what GET /overrides/{id} shows, signed with his step-up key)\n`);
      let answer: { executionStatus?: string };
      try {
        ({ answer } = await approveHeld(serviceOf(this.baseUrl, { ETS_API_KEY: this.keys.bobKey }), id, this.stepUp.bob, this.keys.bobStepUp));
      } catch (e) {
        throw new StepFailed('Bob\'s approval accepted', (e as Error).message);
      }
      process.stdout.write(`   ← ${answer.executionStatus ?? ''}\n`);
      const released = await waiting;
      if (released.isError || field(field(released._meta, 'ets/trustRecord'), 'businessTransactionId') !== id) throw new StepFailed(`the agent's call returning the upstream's result, with the Trust Record of ${id}`, short(released, 300));
      this.#result('approved by Bob: released once, and the agent\'s waiting call returned the upstream\'s result');
    } finally {
      await agent.close().catch(() => undefined);
    }
  }

  async verify(): Promise<void> {
    const r = await this.#call('POST', '/verify', 'agent', { businessTransactionId: this.#executedId });
    const v = expectReply(r, 200, 'a signed Verification with status VERIFIED', (b) => field(b, 'status') === 'VERIFIED');
    const checks = isObject(v.checks) ? Object.entries(v.checks).map(([name, c]) => `${name} ${String(field(c, 'status'))}`) : [];
    this.#result(`VERIFIED${checks.length > 0 ? `: ${checks.join(', ')}` : ''}`);
  }

  async receipt(): Promise<void> {
    const r = await this.#call('POST', '/receipt', 'agent', { businessTransactionId: this.#executedId });
    if ((r.status !== 200 && r.status !== 201) || field(r.body, 'recordType') !== 'receipt') throw new StepFailed('200 or 201 with a signed Receipt', replyText(r));
    this.#receipt = r.body as Json;
    this.#result(`Receipt ${String(this.#receipt.receiptId)} for Verification ${String(this.#receipt.verificationId)}, signed by ${String(this.#receipt.keyId)}`);
  }

  async offline(): Promise<void> {
    const r = await this.#call('GET', '/.well-known/jwks.json', undefined);
    const jwks = expectReply(r, 200, 'the JWKS', (b) => Array.isArray(field(b, 'keys'))) as unknown as JwksLike;
    process.stdout.write('   (no more requests: verifyOffline(record, jwks), what `ets verify FILE --keys JWKS` runs)\n');
    const report = verifyOffline(this.#trustRecord, jwks);
    process.stdout.write(`   Execution Trust Record: ${report.valid ? 'VALID' : 'NOT VALID'}\n`);
    for (const c of report.checks) process.stdout.write(`     ${c.name}: ${c.ok ? `ok${c.detail ? ` (${c.detail})` : ''}` : `FAILED: ${c.detail ?? ''}`}\n`);
    const others: [string, unknown][] = [
      ['Refusal Record', this.#refusal],
      ['Receipt', this.#receipt],
      ...(this.#sourcedRecord ? [['Trust Record with a sourced signal', this.#sourcedRecord] as [string, unknown]] : []),
    ];
    const results = others.map(([name, record]) => [name, verifyOffline(record, jwks)] as const);
    for (const [name, rep] of results) {
      const proofs = rep.checks.find((c) => c.name === 'sourceProofs');
      process.stdout.write(`   ${name}: ${rep.valid ? `VALID${proofs ? ` (sourceProofs: ${proofs.detail ?? 'ok'})` : ''}` : `NOT VALID (${rep.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`).join('; ')})`}\n`);
    }
    const bad = [['Execution Trust Record', report] as const, ...results].filter(([, rep]) => !rep.valid);
    if (bad.length > 0) throw new StepFailed('every record VALID offline', bad.map(([name]) => `${name} NOT VALID`).join(', '));
    this.#result(`the Trust Record, the Refusal Record and the Receipt${this.#sourcedRecord ? ', and the record with the source\'s signed answer,' : ''} verify offline`);
  }
}

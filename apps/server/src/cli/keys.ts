import { parseArgs } from 'node:util';
import { HOLDER_TYPES, isName, NAME_RULES, SYSTEM_PROPOSER, type ApiKeyRecord, type CredentialHolderType } from '@ets/domain';
import { loadSettings } from '../config/settings.js';
import { isEd25519PublicKeyPem } from '@ets/adapters-crypto';
import { ApiKeyFile, generateRawKey, hashKey, otherHolderOfStepUpKey } from '../keys/api-keys.js';
import { CliError } from './errors.js';
import { readStdin } from './read-stdin.js';
import { usageOf } from './usage.js';

const list = (v: string | undefined): string[] | undefined =>
  v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);

function keyFile(): ApiKeyFile {
  const settings = loadSettings();
  if (settings.apiKeysInline !== undefined) {
    throw new CliError('SVC_API_KEYS is set: the server takes its keys from it, not from the key file. Unset it to manage keys with ets keys.');
  }
  return new ApiKeyFile(settings.apiKeysFile);
}

const RESTART = 'The server reads keys only at start: restart it for this to take effect.';

/** `ets keys add|remove|list` (CONTRACT "Running it", spec 5.11). */
export async function keysCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === 'add') return add(rest);
  if (sub === 'remove') return remove(rest);
  if (sub === 'list') return show(rest);
  throw new CliError(`${usageOf('keys add')}\n${usageOf('keys remove')}\n${usageOf('keys list')}`, 2);
}

async function add(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      'caller-id': { type: 'string' },
      holder: { type: 'string' },
      capabilities: { type: 'string' },
      'principal-ids': { type: 'string' },
      'tenant-ids': { type: 'string' },
      'step-up-key': { type: 'string' },
    },
    strict: true,
  });
  const callerId = values['caller-id']?.trim();
  if (!callerId) throw new CliError('--caller-id is required.', 2);
  if (!isName('callerId', callerId)) throw new CliError(`--caller-id must be ${NAME_RULES.callerId.says}.`, 2);
  if (callerId === SYSTEM_PROPOSER) throw new CliError(`--caller-id '${SYSTEM_PROPOSER}' is reserved for the service itself.`, 2);
  const holder = values.holder as CredentialHolderType | undefined;
  if (holder !== undefined && !HOLDER_TYPES.includes(holder)) {
    throw new CliError(`--holder must be one of ${HOLDER_TYPES.join(', ')}.`, 2);
  }
  let stepUpPublicKey: string | undefined;
  if (values['step-up-key'] !== undefined) {
    if (values['step-up-key'] !== '-') throw new CliError("--step-up-key takes '-' and reads the PEM from standard input.", 2);
    if (holder !== 'USER') throw new CliError('--step-up-key requires --holder USER: only a verified human may approve changes.', 2);
    stepUpPublicKey = (await readStdin()).trim() + '\n';
    if (!isEd25519PublicKeyPem(stepUpPublicKey)) throw new CliError('The step-up key on standard input is not an Ed25519 public key in PEM.', 2);
  }
  const file = keyFile();
  const records = file.read();
  const keyHolder = stepUpPublicKey === undefined ? undefined : otherHolderOfStepUpKey(records, stepUpPublicKey, callerId);
  if (keyHolder !== undefined) {
    throw new CliError(
      `The step-up key on standard input is already the step-up key of caller '${keyHolder}': one step-up key belongs to one person, or they could propose a change and approve it. Each approver needs their own key pair.`,
      2,
    );
  }
  const raw = generateRawKey();
  const record: ApiKeyRecord = {
    callerId,
    keyHash: hashKey(raw),
    ...(holder ? { credentialHolderType: holder } : {}),
    allowedCapabilities: list(values.capabilities) ?? [],
    ...(values['principal-ids'] !== undefined ? { allowedPrincipalIds: list(values['principal-ids']) } : {}),
    allowedTenantIds: list(values['tenant-ids']) ?? [],
    ...(stepUpPublicKey ? { stepUpPublicKey } : {}),
    createdAt: new Date().toISOString(),
  };
  file.write([...records, record]);
  // The raw key, and nothing else, on stdout: it is never shown again.
  process.stdout.write(raw + '\n');
  process.stderr.write(`Added a key for caller '${callerId}' to ${file.file}. ${RESTART}\n`);
}

async function remove(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { 'caller-id': { type: 'string' }, 'keep-newest': { type: 'boolean' } }, strict: true });
  const callerId = values['caller-id']?.trim();
  if (!callerId) throw new CliError('--caller-id is required.', 2);
  const file = keyFile();
  const records = file.read();
  const mine = records.filter((r) => r.callerId === callerId);
  if (mine.length === 0) throw new CliError(`No key for caller '${callerId}'.`);
  let keep: ApiKeyRecord | undefined;
  if (values['keep-newest']) {
    // The key added last: the latest createdAt, and among equals the later one in the file.
    keep = mine.reduce((a, b) => (b.createdAt >= a.createdAt ? b : a));
  }
  const remaining = records.filter((r) => r.callerId !== callerId || r === keep);
  if (remaining.length === 0) {
    throw new CliError('Refusing to remove the last key: the server cannot start without one. Add another key first.');
  }
  file.write(remaining);
  const removed = records.length - remaining.length;
  process.stderr.write(`Removed ${removed} key(s) of caller '${callerId}'${keep ? ', kept the newest' : ''}. ${RESTART}\n`);
}

async function show(argv: string[]): Promise<void> {
  parseArgs({ args: argv, options: {}, strict: true });
  const records = keyFile().read();
  // Never a key or a hash: who, what they may do, and when the key was added.
  const rows = records.map((r) => ({
    callerId: r.callerId,
    holder: r.credentialHolderType ?? '-',
    capabilities: r.allowedCapabilities.join(',') || '-',
    principals: r.allowedPrincipalIds?.join(',') ?? '(own id)',
    tenants: r.allowedTenantIds.join(',') || '-',
    stepUpKey: r.stepUpPublicKey ? 'yes' : 'no',
    createdAt: r.createdAt,
  }));
  if (rows.length === 0) {
    process.stdout.write('No keys. A first start of the server issues one.\n');
    return;
  }
  const cols = Object.keys(rows[0]!) as (keyof (typeof rows)[number])[];
  const width = (c: (typeof cols)[number]) => Math.max(c.length, ...rows.map((r) => r[c].length));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(width(cols[i]!))).join('  ').trimEnd();
  process.stdout.write([line(cols), ...rows.map((r) => line(cols.map((c) => r[c])))].join('\n') + '\n');
}

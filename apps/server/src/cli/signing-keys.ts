import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { EnvKeyProvider, ServiceSigningKeys, type KeyProvider, type RotationOutcome } from '@ets/adapters-crypto';
import { createDataSource, TypeOrmPublishedKeyStore } from '@ets/adapters-persistence';
import type { PublishedKeyStore } from '@ets/domain';
import { loadSettings, type Settings } from '../config/settings.js';
import { storageTargetFor } from '../storage-target.js';
import { openKeyProvider } from '../signing/key-provider.js';
import { CliError } from './errors.js';
import { usageOf } from './usage.js';

/** `ets signing-keys rotate|list`: the service's own signing keys, with whichever provider holds them. */
export async function signingKeysCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'rotate' && sub !== 'list') throw new CliError(`${usageOf('signing-keys rotate')}\n${usageOf('signing-keys list')}`, 2);
  parseArgs({ args: rest, options: {}, strict: true });
  const settings = loadSettings();
  if (sub === 'rotate' && settings.signingProvider.kind === 'env') return handOverEnvKeys(settings);
  // (pkcs11 with hybrid mode never gets here: the settings refuse it, the module holds Ed25519 keys only.)
  const provider = await openKeyProvider(settings, { forRotation: sub === 'rotate' });
  try {
    if (sub === 'rotate') {
      const hadPqKey = provider.activeKeyIds.pqKeyId !== undefined;
      explainRotation(provider, await provider.rotate(), hadPqKey);
    } else await list(settings, provider);
  } finally {
    await provider.close();
  }
}

/**
 * The environment of a running service cannot be changed from here: new keys are handed to the
 * operator instead. Works without current keys too, which is how the first ones are made.
 */
async function handOverEnvKeys(settings: Settings): Promise<void> {
  const current = await openKeyProvider(settings).catch(() => undefined);
  await current?.close();
  const outcome = await EnvKeyProvider.generate(settings.signingMode);
  const names = Object.keys(outcome.environment);
  // The one place a private key is shown: like a new API key, once, on stdout, stored nowhere.
  process.stdout.write(JSON.stringify({ ...outcome.active, environment: outcome.environment }) + '\n');
  const old = current
    ? ` The current key ${current.activeKeyIds.keyId} stays published: every start records the public half of its keys in the database, so what it signed keeps verifying.`
    : '';
  process.stderr.write(
    `New private key(s) printed on stdout, shown only this once and stored nowhere. Put them in your secret store as ${names.join(' and ')} ` +
      `(e.g. jq -r '.environment.${names[0]}'), then restart every instance.${old}\n`,
  );
}

function explainRotation(provider: KeyProvider, outcome: RotationOutcome, hadPqKey: boolean): void {
  process.stdout.write(JSON.stringify(outcome.active) + '\n');
  const where = provider.kind === 'pkcs11' ? `generated in the ${provider.location}` : `written to ${provider.location}`;
  // A data dir of ed25519 mode, rotated in hybrid mode, has just got its first usable ML-DSA-65 key.
  const hybrid = outcome.active.pqKeyId !== undefined && !hadPqKey ? ' The data dir now has an ML-DSA-65 key: start the server with SVC_SIGNING_MODE=hybrid.' : '';
  process.stderr.write(
    `New active signing key(s) ${where}. Older keys stay published and keep verifying.${hybrid} ` +
      'Running servers publish the new key within 5 minutes and sign with it once restarted.\n',
  );
}

async function list(settings: Settings, provider: KeyProvider): Promise<void> {
  const published = await openPublishedKeys(settings);
  try {
    const keys = await ServiceSigningKeys.open(provider, published ? { store: published.store } : {});
    for (const k of keys.keys()) {
      const source = k.heldBy === 'provider' ? provider.kind : 'published only';
      process.stdout.write(`${k.keyId}  ${k.alg}  ${k.active ? 'active' : 'retired'}  ${k.createdAt ?? '-'}  ${source}\n`);
    }
  } finally {
    await published?.close();
  }
}

/**
 * The published-keys table, read only (listing never writes, never migrates), or undefined when
 * the service has not created it yet. Keys of earlier providers and earlier environment values
 * are known only there.
 */
async function openPublishedKeys(settings: Settings): Promise<{ store: PublishedKeyStore; close(): Promise<void> } | undefined> {
  const target = storageTargetFor(settings);
  if (target.kind === 'sqlite' && !existsSync(target.file)) return undefined;
  const dataSource = createDataSource(target, { readOnly: true });
  try {
    await dataSource.initialize();
    const runner = dataSource.createQueryRunner();
    const exists = await runner.hasTable('published_signing_keys').finally(() => runner.release());
    if (!exists) {
      await dataSource.destroy();
      return undefined;
    }
  } catch {
    // The message of a connection error may name the database; it is not needed to list keys.
    process.stderr.write('The database could not be read: keys that only the published-keys table remembers are not listed.\n');
    if (dataSource.isInitialized) await dataSource.destroy().catch(() => undefined);
    return undefined;
  }
  const table = new TypeOrmPublishedKeyStore(dataSource);
  return { store: { remember: async () => undefined, list: () => table.list() }, close: () => dataSource.destroy() };
}

import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { EnvKeyProvider, KeyRing, type KeyProvider, type RotationOutcome } from '@ets/adapters-crypto';
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
  if (sub === 'list') return list(settings);
  // (pkcs11 with hybrid mode never gets here: the settings refuse it, the module holds Ed25519 keys only.)
  const provider = await openKeyProvider(settings, { forRotation: true });
  try {
    const hadPqKey = provider.activeKeyIds.pqKeyId !== undefined;
    explainRotation(provider, await provider.rotate(), hadPqKey);
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

/**
 * Lists the keys of the provider the settings name, which is the one the server signs with only
 * when it runs with the same settings: the first line says which provider was read, and a
 * warning says when the database shows that the server signs with another one.
 */
async function list(settings: Settings): Promise<void> {
  const kind = settings.signingProvider.kind;
  // A data dir without keys has none to list; opening the disk provider would generate the first ones.
  const provider = kind === 'disk' && !KeyRing.exists(settings.dataDir) ? undefined : await openKeyProvider(settings);
  try {
    const published = await openPublishedKeys(settings);
    const recorded = (await published?.store.list().finally(() => published.close())) ?? [];
    const where = provider?.location ?? `${path.join(settings.dataDir, 'keys')}: no keys yet, the first start generates them`;
    process.stdout.write(`provider: ${kind} (${where}), SVC_SIGNING_PROVIDER=${kind}\n`);
    const held = provider?.keys() ?? [];
    const heldIds = new Set(held.map((k) => k.keyId));
    const firstPublished = new Map(recorded.map((k) => [k.keyId, k.publishedAt]));
    for (const k of held) process.stdout.write(`${k.keyId}  ${k.alg}  ${k.active ? 'active' : 'retired'}  ${k.createdAt ?? firstPublished.get(k.keyId) ?? '-'}  ${kind}\n`);
    for (const k of recorded.filter((r) => !heldIds.has(r.keyId))) {
      process.stdout.write(`${k.keyId}  ${k.alg}  retired  ${k.publishedAt}  published only (held by ${k.provider} when published)\n`);
    }
    // The newest key the service published names the provider it last started with.
    const newest = recorded.at(-1);
    if (newest && newest.provider !== kind && !heldIds.has(newest.keyId)) {
      process.stderr.write(
        `Note: the newest published key, ${newest.keyId} (${newest.publishedAt}), was held by the ${newest.provider} provider, but this lists ${kind} (SVC_SIGNING_PROVIDER=${kind} here): ` +
          `if the server signs with ${newest.provider}, run this with the server's settings.\n`,
      );
    }
  } finally {
    await provider?.close();
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

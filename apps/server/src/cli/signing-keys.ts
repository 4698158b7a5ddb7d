import { parseArgs } from 'node:util';
import { KeyRing } from '@ets/adapters-crypto';
import { loadSettings } from '../config/settings.js';
import { CliError } from './errors.js';

/** `ets signing-keys rotate|list`: the service's own signing keys in the data dir. */
export async function signingKeysCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  parseArgs({ args: rest, options: {}, strict: true });
  const settings = loadSettings();
  const ring = await KeyRing.open({ dataDir: settings.dataDir, mode: settings.signingMode });
  if (sub === 'rotate') {
    const active = await ring.rotate();
    process.stdout.write(JSON.stringify(active) + '\n');
    process.stderr.write('New active signing key(s). Older keys stay published and keep verifying. Restart the server to sign with the new key.\n');
    return;
  }
  if (sub === 'list') {
    for (const k of ring.keys()) process.stdout.write(`${k.keyId}  ${k.alg}  ${k.active ? 'active' : 'retired'}  ${k.createdAt}\n`);
    return;
  }
  throw new CliError('Usage: ets signing-keys rotate|list', 2);
}

import { readFileSync } from 'node:fs';
import { EnvKeyProvider, KeyRing, Pkcs11KeyProvider, type KeyProvider } from '@ets/adapters-crypto';
import { ConfigError, type Settings } from '../config/settings.js';

/**
 * Opens the signing key provider the settings name (CONTRACT "Signing key providers"). A provider
 * that cannot serve the settings throws a KeyRingError (or ConfigError) of one line, which stops
 * the start with the exit code of every other settings error.
 */
export async function openKeyProvider(settings: Settings, options: { forRotation?: boolean } = {}): Promise<KeyProvider> {
  const provider = settings.signingProvider;
  const mode = settings.signingMode;
  switch (provider.kind) {
    case 'disk':
      // Rotating in hybrid mode is how a data dir of ed25519 mode gets its ML-DSA-65 key.
      return KeyRing.open({ dataDir: settings.dataDir, mode, forRotation: options.forRotation });
    case 'env':
      return EnvKeyProvider.open({ mode, ed25519Pem: provider.ed25519Pem, mlDsa65Pem: provider.mlDsa65Pem });
    case 'pkcs11':
      return Pkcs11KeyProvider.open({ mode, module: provider.module, token: provider.token, pin: 'value' in provider.pin ? provider.pin.value : readPinFile(provider.pin.file) });
  }
}

function readPinFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as { code?: string }).code ?? 'unreadable';
    throw new ConfigError(`Invalid setting SVC_PKCS11_PIN_FILE=${JSON.stringify(file)}: cannot read the file (${code}).`);
  }
  // A file written with `echo` ends with a newline that is not part of the PIN.
  const pin = text.replace(/\r?\n$/, '');
  if (pin === '') throw new ConfigError(`Invalid setting SVC_PKCS11_PIN_FILE=${JSON.stringify(file)}: the file is empty.`);
  return pin;
}

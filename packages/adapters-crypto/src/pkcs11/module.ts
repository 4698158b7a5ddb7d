/**
 * Loading a PKCS#11 module through `pkcs11js` (the maintained Node binding), finding a token by
 * its label and logging in. Every failure becomes one Pkcs11SetupError line naming the setting
 * to fix; a PIN never appears in a message.
 */
import { createRequire } from 'node:module';
import type * as Pkcs11Binding from 'pkcs11js';
import { KeyRingError } from '../errors.js';

export type Pkcs11js = typeof Pkcs11Binding;
export type Pkcs11 = Pkcs11Binding.PKCS11;
export type Handle = Buffer;

/** Mechanisms and key type of PKCS#11 3.0 that the binding has no names for. */
export const CKK_EC_EDWARDS = 0x40;
export const CKM_EC_EDWARDS_KEY_PAIR_GEN = 0x1055;
export const CKM_EDDSA = 0x1057;

/** The module, a token or the login cannot be used: the service must not start. */
export class Pkcs11SetupError extends KeyRingError {
  constructor(
    readonly setting: 'SVC_PKCS11_MODULE' | 'SVC_PKCS11_TOKEN' | 'SVC_PKCS11_PIN',
    message: string,
  ) {
    super(message);
  }
}

interface LoadedModule {
  binding: Pkcs11js;
  lib: Pkcs11;
  refs: number;
}

// C_Initialize and C_Finalize act on the whole process, so providers of one process that use
// the same module share one initialisation, finalised when the last of them closes.
const loaded = new Map<string, LoadedModule>();

export interface OpenedModule {
  readonly binding: Pkcs11js;
  readonly lib: Pkcs11;
  release(): void;
}

export function openModule(modulePath: string): OpenedModule {
  let entry = loaded.get(modulePath);
  if (!entry) {
    // Loaded on first use only, so the disk and env providers never need the native addon.
    const binding = createRequire(import.meta.url)('pkcs11js') as Pkcs11js;
    const lib = new binding.PKCS11();
    try {
      lib.load(modulePath);
    } catch (e) {
      throw new Pkcs11SetupError('SVC_PKCS11_MODULE', `cannot open the PKCS#11 module SVC_PKCS11_MODULE=${modulePath}: ${reason(e)}`);
    }
    try {
      lib.C_Initialize({ flags: binding.CKF_OS_LOCKING_OK });
    } catch (e) {
      if (codeOf(e) !== binding.CKR_CRYPTOKI_ALREADY_INITIALIZED) {
        closeQuietly(lib);
        throw new Pkcs11SetupError('SVC_PKCS11_MODULE', `the PKCS#11 module SVC_PKCS11_MODULE=${modulePath} failed to initialise: ${reason(e)}`);
      }
    }
    entry = { binding, lib, refs: 0 };
    loaded.set(modulePath, entry);
  }
  entry.refs += 1;
  const opened = entry;
  let released = false;
  return {
    binding: opened.binding,
    lib: opened.lib,
    release() {
      if (released) return;
      released = true;
      opened.refs -= 1;
      if (opened.refs > 0) return;
      loaded.delete(modulePath);
      try {
        opened.lib.C_Finalize();
      } catch {
        // Finalising a module that is going away anyway: nothing left to do with the error.
      }
      closeQuietly(opened.lib);
    },
  };
}

/** The slot holding the token with this label (labels are blank-padded to 32 bytes). */
export function findTokenSlot(module: OpenedModule, modulePath: string, label: string): Handle {
  const { lib } = module;
  const labels: string[] = [];
  for (const slot of lib.C_GetSlotList(true)) {
    const tokenLabel = lib.C_GetTokenInfo(slot).label.trim();
    if (tokenLabel === label) return slot;
    labels.push(JSON.stringify(tokenLabel));
  }
  const present = labels.length > 0 ? `tokens present: ${labels.join(', ')}` : 'no initialised token is present';
  throw new Pkcs11SetupError('SVC_PKCS11_TOKEN', `no token labelled ${JSON.stringify(label)} in the PKCS#11 module ${modulePath} (SVC_PKCS11_TOKEN; ${present})`);
}

/** Logs the application in as the token's user; an earlier login of this process is fine. */
export function login(module: OpenedModule, session: Handle, tokenLabel: string, pin: string): void {
  const { binding, lib } = module;
  try {
    lib.C_Login(session, binding.CKU_USER, pin);
  } catch (e) {
    const code = codeOf(e);
    if (code === binding.CKR_USER_ALREADY_LOGGED_IN) return;
    const why = code === binding.CKR_PIN_INCORRECT ? 'refused the PIN' : code === binding.CKR_PIN_LOCKED ? 'has locked the PIN' : 'refused the login';
    throw new Pkcs11SetupError('SVC_PKCS11_PIN', `the token ${JSON.stringify(tokenLabel)} ${why} (SVC_PKCS11_PIN or SVC_PKCS11_PIN_FILE): ${reason(e)}`);
  }
}

export function codeOf(e: unknown): number | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The binding's message: a CKR_ name or the loader's error, never an argument (so never a PIN). */
function reason(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  return message.split('\n')[0]!.trim() || 'unknown error';
}

function closeQuietly(lib: Pkcs11): void {
  try {
    lib.close();
  } catch {
    // The library handle is being dropped; a failure to unload changes nothing for the caller.
  }
}

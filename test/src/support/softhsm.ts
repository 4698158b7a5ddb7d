import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { REPO_ROOT } from './process.js';

export interface SoftHsmToken {
  module: string;
  conf: string;
  label: string;
  pin: string;
  /** The settings of a server that signs with this token (and SOFTHSM2_CONF for the module). */
  env: Record<string, string>;
  destroy(): void;
}

const SCRIPT = path.join(REPO_ROOT, 'scripts', 'softhsm-token.mjs');

/**
 * A fresh SoftHSM2 token in this run's token directory (SOFTHSM2_CONF, set by the Jest
 * globalSetup), made by scripts/softhsm-token.mjs, which installs softhsm2 when missing. The pkcs11
 * tests never skip: without SoftHSM2 they fail here, saying why.
 */
export function createSoftHsmToken(prefix = 'ets'): SoftHsmToken {
  const conf = process.env.SOFTHSM2_CONF;
  if (!conf || !process.env.ETS_TEST_SOFTHSM2_DIR) {
    throw new Error('SOFTHSM2_CONF is not set: run the tests with the repository jest.config.js, whose globalSetup makes a SoftHSM2 token directory');
  }
  const label = `${prefix}-${randomBytes(4).toString('hex')}`;
  // Distinctive, so that a test searching files and logs for it cannot match by chance.
  const pin = `ets-pin-${randomBytes(6).toString('hex')}`;
  let made: { module: string; conf: string; label: string; pin: string };
  try {
    const out = execFileSync(process.execPath, [SCRIPT, path.dirname(conf), label, pin], { encoding: 'utf8', timeout: 600_000, env: { ...process.env } });
    made = JSON.parse(out) as typeof made;
  } catch (e) {
    throw new Error(`SoftHSM2 could not be set up for the pkcs11 tests (apt-get install softhsm2): ${(e as Error).message}`);
  }
  return {
    ...made,
    env: {
      SOFTHSM2_CONF: made.conf,
      SVC_SIGNING_PROVIDER: 'pkcs11',
      SVC_PKCS11_MODULE: made.module,
      SVC_PKCS11_TOKEN: made.label,
      SVC_PKCS11_PIN: made.pin,
    },
    destroy() {
      execFileSync('softhsm2-util', ['--delete-token', '--token', made.label], { env: { ...process.env, SOFTHSM2_CONF: made.conf }, stdio: 'ignore' });
    },
  };
}

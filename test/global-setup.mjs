// Jest globalSetup: SoftHSM2 reads SOFTHSM2_CONF from the real process environment when its module
// is initialised, and a test file cannot change that environment (Jest hands each file a copy of
// process.env). So the variable is set here, before the workers start and inherit it: a softhsm2.conf
// with a token directory of this run's own. Each pkcs11 test makes its own token in it.
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSoftHsmConf } from '../scripts/softhsm-token.mjs';

export default function globalSetup() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-softhsm-'));
  process.env.ETS_TEST_SOFTHSM2_DIR = dir;
  process.env.SOFTHSM2_CONF = writeSoftHsmConf(dir);
}

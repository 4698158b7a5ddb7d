// Jest globalTeardown: removes the SoftHSM2 token directory of this run (see global-setup.mjs).
import { rmSync } from 'node:fs';

export default function globalTeardown() {
  const dir = process.env.ETS_TEST_SOFTHSM2_DIR;
  if (dir) rmSync(dir, { recursive: true, force: true });
}

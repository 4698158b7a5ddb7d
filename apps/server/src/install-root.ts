import { fileURLToPath } from 'node:url';

/** The repository (install) root: apps/server/{dist,src}/ is three levels below it. */
export const INSTALL_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * The install root as one shell word, for commands the CLI prints (`npm --prefix <root> …`): from
 * outside the clone `npx ets` is an unrelated registry package, so the CLI names its own path.
 */
export function installRootWord(): string {
  const root = INSTALL_ROOT.replace(/[\\/]+$/, '') || '/';
  return /^[\w@%+=:,./-]+$/.test(root) ? root : `'${root.replace(/'/g, `'\\''`)}'`;
}

import { createRequire } from 'node:module';
import path from 'node:path';

/** The build folder of the approvers' console (`@ets/console`'s dist: console.html and assets/), as `npm run build` makes it. */
export function consoleDistDir(): string {
  return path.join(path.dirname(createRequire(import.meta.url).resolve('@ets/console/package.json')), 'dist');
}

import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * The build folder of the approvers' console (`@ets/console`'s dist: console.html and assets/), as
 * `npm run build` makes it; undefined in an install without the console (`/console` then says so).
 */
export function consoleDistDir(): string | undefined {
  try {
    return path.join(path.dirname(createRequire(import.meta.url).resolve('@ets/console/package.json')), 'dist');
  } catch {
    return undefined;
  }
}

import { readFileSync } from 'node:fs';

/**
 * The internal build identifier of spec 9.1: written by `npm run build` (scripts/write-build-info.mjs)
 * as `<git commit>.<build time>`; `dev` when running from sources that were never built.
 */
export function readBuildId(): string {
  if (process.env.SVC_BUILD_ID) return process.env.SVC_BUILD_ID;
  try {
    const info = JSON.parse(readFileSync(new URL('../build-info.json', import.meta.url), 'utf8')) as { build?: string };
    return info.build ?? 'dev';
  } catch {
    return 'dev';
  }
}

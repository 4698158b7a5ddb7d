import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { parseStrictJson } from '@ets/adapters-http';
import type { Logger, PolicyGovernance } from '@ets/domain';

/** The policies shipped with the product: apps/server/policies (SVC_POLICIES_DIR overrides it). */
export const SHIPPED_POLICIES_DIR = fileURLToPath(new URL('../policies/', import.meta.url));

/** A policy document file: JSON (duplicate keys refused), or YAML by its extension. */
export function readPolicyFile(file: string): unknown {
  const text = readFileSync(file, 'utf8');
  if (/\.ya?ml$/i.test(file)) return parseYaml(text, { uniqueKeys: true });
  return parseStrictJson(text);
}

/**
 * Adds every shipped policy as a pending change proposed by `system` (spec 3: a shipped version
 * takes effect only after a human approves it). Idempotent: a version that is published, pending,
 * or was proposed with this content before is skipped. A file that cannot be read or does not
 * validate is logged and skipped; it never stops the start.
 */
export async function proposeShippedPolicies(dir: string, governance: PolicyGovernance, logger: Logger): Promise<void> {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => /\.(json|ya?ml)$/i.test(f)).sort();
  } catch (e) {
    logger.warn({ dir, err: (e as Error).message }, 'shipped policies: folder cannot be read; none proposed');
    return;
  }
  for (const name of files) {
    const file = path.join(dir, name);
    let document: unknown;
    try {
      document = readPolicyFile(file);
    } catch (e) {
      logger.error({ file, err: (e as Error).message }, 'shipped policy skipped: not readable JSON or YAML');
      continue;
    }
    const result = await governance.proposeShipped(document, name);
    if (result.outcome === 'invalid') {
      logger.error({ file, errors: result.errors }, 'shipped policy skipped: it does not validate');
    } else if (result.outcome === 'proposed') {
      const c = result.change;
      logger.info({ file, policy: c.policyName, version: c.policyVersion, changeId: c.id }, 'shipped policy proposed; it takes effect once a human approves it');
    } else {
      logger.debug({ file, outcome: result.outcome }, 'shipped policy already proposed or published');
    }
  }
}

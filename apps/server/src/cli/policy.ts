import { Sha256Hasher } from '@ets/adapters-crypto';
import { validateNewPolicyVersion, type PolicyDocument } from '@ets/domain';
import { readPolicyFile } from '../shipped-policies.js';
import { CliError } from './errors.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('policy validate');

/**
 * `ets policy validate FILE`: the checks the service runs on a proposal (schema, CEL types), with
 * each error on its own line. Exit 0 only when the document is valid.
 */
export async function policyCommand(argv: string[]): Promise<void> {
  const [sub, file, ...extra] = argv;
  if (sub !== 'validate' || !file || extra.length > 0) throw new CliError(USAGE, 2);
  let document: unknown;
  try {
    document = readPolicyFile(file);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new CliError(`${file}: ${err.code === 'ENOENT' || err.code === 'EACCES' || err.code === 'EISDIR' ? `cannot read (${err.code})` : `not valid JSON or YAML: ${err.message}`}`);
  }
  const { valid, errors } = validateNewPolicyVersion(document);
  if (!valid) {
    for (const e of errors) process.stdout.write(`${e}\n`);
    throw new CliError(`${file}: invalid (${errors.length} error${errors.length === 1 ? '' : 's'})`);
  }
  const doc = document as PolicyDocument;
  process.stdout.write(`valid: policy '${doc.name}' version '${doc.policyVersion}', contentHash ${new Sha256Hasher().contentHash(doc)}\n`);
}

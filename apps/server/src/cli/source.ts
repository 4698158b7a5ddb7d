import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULT_VALID_FOR_SECONDS, readSigningKey, startReferenceSource, type SourceSigningKey } from '../signal-source/reference-source.js';
import { CliError, codeOrMessage } from './errors.js';
import { stopWhenParentExits } from './parent-watch.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('source serve');

const readText = (file: string, what: string): string => {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read ${what} ${file}: ${codeOrMessage(e)}`, 2);
  }
};

/**
 * `ets source serve`: the reference business signal source (see signal-source/reference-source.ts
 * and the operator guide, "Business signal sources"). Prints its key id and public key, to be
 * registered with `POST /business-signal-sources/changes`, and serves until stopped.
 */
export async function sourceCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'serve') throw new CliError(USAGE, 2);
  const { values } = parseArgs({
    args: rest,
    options: {
      facts: { type: 'string' },
      key: { type: 'string' },
      cert: { type: 'string' },
      'cert-key': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'valid-for': { type: 'string' },
    },
    strict: true,
  });
  if (!values.facts) throw new CliError(`--facts is required (the JSON file of facts). ${USAGE}`, 2);
  if (!values.cert || !values['cert-key']) throw new CliError(`--cert and --cert-key are required: the service asks sources over https only. ${USAGE}`, 2);
  const port = values.port === undefined ? 8443 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError(`--port must be a port number. ${USAGE}`, 2);
  const validFor = values['valid-for'] === undefined ? DEFAULT_VALID_FOR_SECONDS : Number(values['valid-for']);
  if (!Number.isInteger(validFor) || validFor < 1) throw new CliError(`--valid-for must be a whole number of seconds. ${USAGE}`, 2);
  JSON.parse(readText(values.facts, 'the facts file')); // fail now, not at the first question
  let key: SourceSigningKey | undefined;
  if (values.key) {
    try {
      key = readSigningKey(readText(values.key, 'the signing key'));
    } catch (e) {
      throw new CliError(`--key: ${(e as Error).message}`, 2);
    }
  }
  const source = await startReferenceSource({
    factsFile: values.facts,
    key,
    tls: { cert: readText(values.cert, 'the certificate'), key: readText(values['cert-key'], 'the certificate key') },
    host: values.host,
    port,
    validForSeconds: validFor,
    onAnswer: (q, a) => console.error(JSON.stringify({ question: q, status: a.status })),
  });
  console.log(`business signal source listening on https://${source.address}:${source.port}/ (answers valid ${validFor} s)`);
  console.log(key ? `keyId: ${key.keyId}\npublicKey (register it with the source):\n${key.publicKeyPem}` : 'no --key: answers are not signed (register the source without a publicKey)');
  const stop = () => void source.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  stopWhenParentExits(stop);
  await new Promise<never>(() => undefined);
}

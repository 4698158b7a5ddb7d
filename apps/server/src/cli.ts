#!/usr/bin/env node
import { config as loadDotenv } from 'dotenv';
import { ConfigError } from './config/settings.js';
import { CliError } from './cli/errors.js';

const USAGE = `Usage: ets <command> [options]

Commands:
  serve                                   start the service (what npm start runs)
  keys add --caller-id ID [--holder USER|ROLE|SERVICE|ORGANIZATION] [--capabilities a:b,c:d|*]
           [--principal-ids p1,p2] [--tenant-ids t1,t2] [--step-up-key -]
                                          add an API key; prints the raw key once (stdout)
  keys remove --caller-id ID [--keep-newest]
                                          remove a caller's keys (the last key cannot go)
  keys list                               list key records (never a key or a hash)
  signing-keys rotate|list                new active signing key / list published keys
  step-up sign --key PRIVATE.pem --change ID --action approve|reject [--reason TEXT] [--ttl SECONDS]
               [--caller-id ID]           print a step-up envelope (approve/reject body) on stdout
  policy validate FILE                    validate a policy document (JSON or YAML); exit 0 if valid
  verify FILE|- [--keys JWKS_FILE_OR_URL] verify a signed record offline (as the API served it; '-' reads
                                          stdin); keys default to http://SVC_HOST:SVC_PORT/.well-known/jwks.json;
                                          exit 0 only when it verifies, 1 when not, 2 on usage or I/O errors
  demo --setup DIR                        (server stopped) add the demo callers' keys, write DIR/demo.env
  demo --from DIR [--url URL]             (server running, SVC_SANDBOX=true) walk through governance,
                                          execution, refusal, verification, receipt, offline verification

Settings are read from the environment and from a .env file in the working directory.
See the README for every setting and its default.`;

type Command = (argv: string[]) => Promise<void>;

// Each command's module is loaded only when it runs, so `ets --help` and the light commands do not
// pay for the server's dependencies (Express, TypeORM, Inversify, the CEL compiler).
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => {
    await import('reflect-metadata'); // before any decorated class of the composition root is evaluated
    const { serveCommand } = await import('./cli/serve.js');
    return () => serveCommand();
  },
  keys: async () => (await import('./cli/keys.js')).keysCommand,
  'signing-keys': async () => (await import('./cli/signing-keys.js')).signingKeysCommand,
  'step-up': async () => (await import('./cli/step-up.js')).stepUpCommand,
  policy: async () => (await import('./cli/policy.js')).policyCommand,
  verify: async () => (await import('./cli/verify.js')).verifyCommand,
  demo: async () => (await import('./cli/demo.js')).demoCommand,
};

/** KeyRingError by name: importing the crypto adapter just to test the class would slow every command. */
const isKeyRingError = (e: unknown): e is Error => {
  for (let proto = e; proto !== null && typeof proto === 'object'; proto = Object.getPrototypeOf(proto) as unknown) {
    if ((proto as { constructor?: { name?: string } }).constructor?.name === 'KeyRingError') return true;
  }
  return false;
};

async function main(argv: string[]): Promise<void> {
  loadDotenv({ quiet: true });
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return;
  }
  const load = Object.prototype.hasOwnProperty.call(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) throw new CliError(`Unknown command '${name}'. Run 'ets --help' for the list of commands.`, 2);
  await (await load())(rest);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  const err = e as { code?: string; message?: string };
  if (e instanceof ConfigError || e instanceof CliError || isKeyRingError(e)) {
    console.error(`ets: ${e.message}`);
    process.exit(e instanceof CliError ? e.exitCode : 2);
  }
  if (typeof err?.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS')) {
    console.error(`ets: ${err.message ?? 'invalid arguments'}`);
    process.exit(2);
  }
  if (err?.code === 'EADDRINUSE') {
    console.error(`ets: cannot listen: the address is already in use (${err.message ?? ''}).`);
    process.exit(1);
  }
  console.error(`ets: failed to start: ${err?.message ?? String(e)}`);
  process.exit(1);
});

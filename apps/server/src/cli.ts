#!/usr/bin/env node
import 'reflect-metadata';
import { config as loadDotenv } from 'dotenv';
import { KeyRingError } from '@ets/adapters-crypto';
import { ConfigError } from './config/settings.js';
import { serveCommand } from './cli/serve.js';
import { CliError } from './cli/errors.js';
import { keysCommand } from './cli/keys.js';
import { signingKeysCommand } from './cli/signing-keys.js';
import { stepUpCommand } from './cli/step-up.js';
import { policyCommand } from './cli/policy.js';

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

Settings are read from the environment and from a .env file in the working directory.
See the README for every setting and its default.`;

type Command = (argv: string[]) => Promise<void>;

const COMMANDS: Record<string, Command> = {
  serve: () => serveCommand(),
  keys: keysCommand,
  'signing-keys': signingKeysCommand,
  'step-up': stepUpCommand,
  policy: policyCommand,
};

async function main(argv: string[]): Promise<void> {
  loadDotenv({ quiet: true });
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return;
  }
  const command = COMMANDS[name];
  if (!command) throw new CliError(`Unknown command '${name}'. Run 'ets --help' for the list of commands.`, 2);
  await command(rest);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  const err = e as { code?: string; message?: string };
  if (e instanceof ConfigError || e instanceof CliError || e instanceof KeyRingError) {
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

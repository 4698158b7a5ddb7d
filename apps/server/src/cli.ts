#!/usr/bin/env node
import { config as loadDotenv } from 'dotenv';
import { ConfigError, DEFAULTS } from './config/settings.js';
import { CliError } from './cli/errors.js';
import { COMMANDS } from './cli/commands.js';
import { commandNamed, helpOf, TOP_LEVEL_HELP, VERSION_FLAGS } from './cli/usage.js';
import { readBuildId } from './build-info.js';

/** KeyRingError by name: importing the crypto adapter just to test the class would slow every command. */
const isKeyRingError = (e: unknown): e is Error => {
  for (let proto = e; proto !== null && typeof proto === 'object'; proto = Object.getPrototypeOf(proto) as unknown) {
    if ((proto as { constructor?: { name?: string } }).constructor?.name === 'KeyRingError') return true;
  }
  return false;
};

/** Why `listen` failed, in the operator's words, by error code. */
const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'the address is already in use (another server, or an earlier start still running?)',
  EADDRNOTAVAIL: 'SVC_HOST is not an address of this machine',
  ENOTFOUND: 'SVC_HOST is a host name that does not resolve',
  EAI_AGAIN: 'SVC_HOST could not be resolved (name resolution failed)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
};

async function main(argv: string[]): Promise<void> {
  loadDotenv({ quiet: true });
  const [name, ...rest] = argv;
  if (name !== undefined && VERSION_FLAGS.includes(name)) {
    console.log(`ets build ${readBuildId()}`);
    return;
  }
  if (name === undefined || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    console.log(TOP_LEVEL_HELP);
    return;
  }
  // `help keys add` reads as `keys add --help`. An unknown command or subcommand is a usage error
  // with or without --help: help of something else would read as if it existed.
  const help = name === 'help';
  const args = help ? rest : argv;
  const command = commandNamed(args);
  if (help || helpAsked(args)) {
    console.log(helpOf(command));
    return;
  }
  await (await COMMANDS[command.split(' ')[0]!]!())(rest);
}

/** `--help` or `-h` among the arguments (not after `--`). */
function helpAsked(argv: string[]): boolean {
  const end = argv.indexOf('--');
  const args = end === -1 ? argv : argv.slice(0, end);
  return args.includes('--help') || args.includes('-h');
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
  const listenProblem = LISTEN_ERRORS[err?.code ?? ''];
  if (listenProblem) {
    // Nothing was issued: a first start that cannot listen stores no key, so the next start issues one.
    console.error(`ets: cannot listen on ${process.env.SVC_HOST ?? DEFAULTS.host}:${process.env.SVC_PORT ?? DEFAULTS.port}: ${listenProblem} (${err.message ?? err.code}). Set SVC_HOST and SVC_PORT and start again.`);
    process.exit(1);
  }
  console.error(`ets: failed to start: ${err?.message ?? String(e)}`);
  process.exit(1);
});

#!/usr/bin/env node
import 'reflect-metadata';
import { config as loadDotenv } from 'dotenv';
import { ConfigError } from './config/settings.js';
import { serveCommand } from './cli/serve.js';

/** Thrown by a command for a failure the operator must read: printed as one line, exit 1. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

const USAGE = `Usage: ets <command> [options]

Commands:
  serve                                   start the service (what npm start runs)

Settings are read from the environment and from a .env file in the working directory.
See the README for every setting and its default.`;

type Command = (argv: string[]) => Promise<void>;

const COMMANDS: Record<string, Command> = {
  serve: () => serveCommand(),
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
  if (e instanceof ConfigError || e instanceof CliError) {
    console.error(`ets: ${e.message}`);
    process.exit(e instanceof CliError ? e.exitCode : 2);
  }
  const err = e as { code?: string; message?: string };
  if (err?.code === 'EADDRINUSE') {
    console.error(`ets: cannot listen: the address is already in use (${err.message ?? ''}).`);
    process.exit(1);
  }
  console.error(`ets: failed to start: ${err?.message ?? String(e)}`);
  process.exit(1);
});

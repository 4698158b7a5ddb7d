/**
 * The CLI's commands, by name. Each command's module is loaded only when it runs, so `ets --help`
 * and the light commands do not pay for the server's dependencies (Express, TypeORM, Inversify, the
 * CEL compiler). Their subcommands, and the help of each, are in usage.ts (`HELP`): a command and
 * every subcommand has an entry there, which is what makes it known to the CLI.
 */
export type Command = (argv: string[]) => Promise<void>;

export const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => {
    // The code that runs is measured in a worker thread while the server's modules load and its storage opens.
    (await import('../runtime/running-code.js')).startMeasuringRunningCode();
    await import('reflect-metadata'); // before any decorated class of the composition root is evaluated
    return (await import('./serve.js')).serveCommand;
  },
  keys: async () => (await import('./keys.js')).keysCommand,
  'signing-keys': async () => (await import('./signing-keys.js')).signingKeysCommand,
  'step-up': async () => (await import('./step-up.js')).stepUpCommand,
  overrides: async () => (await import('./overrides.js')).overridesCommand,
  policy: async () => (await import('./policy.js')).policyCommand,
  verify: async () => (await import('./verify.js')).verifyCommand,
  export: async () => (await import('./export.js')).exportCommand,
  backup: async () => (await import('./backup.js')).backupCommand,
  log: async () => (await import('./log-monitor.js')).logCommand,
  demo: async () => (await import('./demo.js')).demoCommand,
  source: async () => (await import('./source.js')).sourceCommand,
  'local-network': async () => (await import('./local-network.js')).localNetworkCommand,
  quickstart: async () => {
    // As for serve: the running code is measured while the server's modules load.
    (await import('../runtime/running-code.js')).startMeasuringRunningCode();
    await import('reflect-metadata');
    return (await import('./quickstart.js')).quickstartCommand;
  },
};

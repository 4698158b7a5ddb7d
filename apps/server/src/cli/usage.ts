import { installRootWord } from '../install-root.js';
import { CliError } from './errors.js';

/**
 * Every command's help, in one place: `ets --help` lists them, `ets <command> [<sub>] --help`
 * prints one (and does nothing else: `ets serve --help` starts nothing), and the commands quote
 * their own synopsis in usage errors.
 */
interface CommandHelp {
  /** One or more synopsis lines, without the leading `ets `. */
  synopsis: string[];
  /** One line for the command list of `ets --help`, which lists the entries that have one. */
  brief?: string;
  summary: string;
  /** Options and arguments, `[flag, meaning]`. */
  options?: [string, string][];
  notes?: string;
}

const SETTINGS_NOTE =
  'Settings are read from the environment and from a .env file in the working directory, and relative paths (the data dir: ./data by default) from it too:\n' +
  'run commands that use the data dir in the folder the server runs in (see the README).';

const SERVICE_NOTE =
  'Your API key is read from the environment variable ETS_API_KEY, never from an argument: arguments show in `ps` to every user of this machine.\n' +
  'Exit 0 when the service answered as asked; 1 with the service\'s status, code and message when it refused (or could not be reached); 2 on usage errors.';

export const HELP: Record<string, CommandHelp> = {
  serve: {
    brief: 'start the service (what `npm start` runs)',
    synopsis: ['serve [--exit-with-parent]'],
    summary: 'Start the service (what `npm start` runs) on SVC_HOST:SVC_PORT. Stops gracefully on SIGTERM and SIGINT.',
    options: [
      ['--exit-with-parent', 'also stop gracefully when the process that started it exits (`npm start` uses it, so stopping npm stops the server)'],
    ],
    notes:
      'A first start with no key configured issues one USER key (all capabilities) once it listens, and prints it once on stderr.\n' +
      SETTINGS_NOTE,
  },
  keys: {
    synopsis: ['keys add|remove|list …'],
    summary: 'Manage the API keys in the key file (SVC_API_KEYS_FILE, default <data dir>/api-keys.json). The server reads keys only at start: restart it after a change.',
    notes: "Run 'ets keys add --help', 'ets keys remove --help' or 'ets keys list --help' for each.",
  },
  'keys add': {
    brief: 'add an API key; prints the raw key once',
    synopsis: ['keys add --caller-id ID [--holder USER|ROLE|SERVICE|ORGANIZATION] [--capabilities a:b,c:d|*]', '    [--principal-ids p1,p2] [--tenant-ids t1,t2] [--step-up-key -]'],
    summary: 'Add an API key. The raw key, and nothing else, is printed on stdout; only its SHA-256 hash is stored and it is never shown again.',
    options: [
      ['--caller-id ID', 'owner of the key (required); appears in every record and audit event it produces'],
      ['--holder TYPE', 'USER (a verified human), ROLE, SERVICE or ORGANIZATION'],
      ['--capabilities LIST', 'actions (namespace:verb) the key may request, comma-separated; * for all; none by default'],
      ['--principal-ids LIST', 'authority.principalId values it may assert (default: its own caller id)'],
      ['--tenant-ids LIST', 'metadata.tenantId values it may use (a request without a tenant id is always allowed)'],
      ['--step-up-key -', 'read an Ed25519 public key (PEM) from stdin: the key that signs approvals (requires --holder USER); refused when another caller has it (one key, one person)'],
    ],
  },
  'keys remove': {
    brief: "remove a caller's keys (the last key cannot go)",
    synopsis: ['keys remove --caller-id ID [--keep-newest]'],
    summary: "Remove a caller's keys. The last key in the file cannot be removed.",
    options: [
      ['--caller-id ID', 'whose keys to remove (required)'],
      ['--keep-newest', 'keep the key added last (rotation: add a key, hand it over, remove the older ones)'],
    ],
  },
  'keys list': {
    brief: 'list key records (never a key or a hash)',
    synopsis: ['keys list'],
    summary: 'List the key records: who, what they may do, when added. Never a key or a hash.',
  },
  'signing-keys': {
    brief: "rotate or list the service's signing keys",
    synopsis: ['signing-keys rotate|list'],
    summary: "The service's own signing keys, held by the provider SVC_SIGNING_PROVIDER names (disk, env or pkcs11). Run 'ets signing-keys rotate --help' or 'ets signing-keys list --help'.",
  },
  'signing-keys rotate': {
    synopsis: ['signing-keys rotate'],
    summary:
      'Make a new active signing key (and ML-DSA-65 key in hybrid mode). Older keys stay published, so what they signed keeps verifying. Restart the server to sign with it. ' +
      'With SVC_SIGNING_MODE=hybrid on a data dir made in ed25519 mode, this is how it gets its ML-DSA-65 key: then start in hybrid mode.',
  },
  'signing-keys list': {
    synopsis: ['signing-keys list'],
    summary:
      'List the signing keys of the provider the settings name (the first line says which, and where): key id, algorithm, active or retired, creation time, who holds it. ' +
      'Keys only the database remembers are listed as published only. Run it with the settings the server runs with; a note says when the server last published a key of another provider. Never makes a key.',
  },
  'step-up': {
    synopsis: ['step-up sign …'],
    summary: "Sign step-up envelopes (the body of approve and reject). Run 'ets step-up sign --help'.",
  },
  'step-up sign': {
    brief: 'print a step-up envelope (the body of approve and reject)',
    synopsis: ['step-up sign --key PRIVATE.pem --change ID --action approve|reject [--reason TEXT] [--ttl SECONDS] [--caller-id ID]'],
    summary: 'Print a step-up envelope as JSON on stdout: the body of POST …/approve or …/reject, signed with your own Ed25519 step-up private key (never the bearer key).',
    options: [
      ['--key FILE', 'your Ed25519 private key, PEM (e.g. openssl genpkey -algorithm ed25519 -out me.pem)'],
      ['--change ID', 'the id of the pending change'],
      ['--action ACTION', 'approve or reject'],
      ['--reason TEXT', 'why; required to reject (recorded as the rejection reason)'],
      ['--ttl SECONDS', 'how long the envelope is valid (default 300)'],
      ['--caller-id ID', 'bind the envelope to your caller id'],
    ],
  },
  overrides: {
    synopsis: ['overrides list|show|approve|reject …'],
    summary: "Held transactions: a requires_override decision waits for a human. Run 'ets overrides list --help', 'ets overrides show --help', 'ets overrides approve --help' or 'ets overrides reject --help'.",
    notes: SERVICE_NOTE,
  },
  'overrides list': {
    brief: 'list held transactions (requires_override decisions waiting for a human)',
    synopsis: ['overrides list [--status PENDING|APPROVED|REJECTED|EXPIRED] [--page N] [--page-size N] [--json] [--url URL]'],
    summary: 'List held transactions, newest first: id, status, action, requesting caller, when held, until when (or who decided), and why it was held. A USER key sees all; any other key its own caller\'s.',
    options: [
      ['--status STATUS', 'only those PENDING, APPROVED, REJECTED or EXPIRED'],
      ['--page N, --page-size N', 'which page, and how many on it (default 1 and 50)'],
      ['--json', 'print the page as the service answers it (GET /overrides)'],
      ['--url URL', `the service (default: ETS_URL, else http://127.0.0.1:8080)`],
    ],
    notes: SERVICE_NOTE,
  },
  'overrides show': {
    brief: 'show one held transaction as JSON',
    synopsis: ['overrides show ID [--url URL]'],
    summary: 'Print one held transaction as JSON (GET /overrides/{id}): its action, parameters and signals, the decision that held it, the scope and signals hash an approval binds to, and what became of it.',
    options: [
      ['ID', 'the businessTransactionId'],
      ['--url URL', 'the service (default: ETS_URL, else http://127.0.0.1:8080)'],
    ],
    notes: SERVICE_NOTE,
  },
  'overrides approve': {
    brief: 'approve a held transaction with your step-up key: it is released once',
    synopsis: ['overrides approve ID --key FILE [--ttl SECONDS] [--url URL]'],
    summary:
      'Approve a held transaction: sign an approval of exactly what the service shows of it (its action, the scope its policy names, the hash of its signals, your caller id) with your Ed25519 step-up key, and send it. ' +
      'The transaction is released once; the answer, what POST /execute would have answered (with the signed Trust Record), is printed as JSON on stdout (verify it with `ets verify -`), a summary on stderr. ' +
      'Needs a USER key with a registered step-up key, neither the requesting caller nor its principal.',
    options: [
      ['ID', 'the businessTransactionId'],
      ['--key FILE', 'your Ed25519 step-up private key, PEM (never the API key)'],
      ['--ttl SECONDS', 'how long the signed approval is valid: 1 to 900 (default 300)'],
      ['--url URL', 'the service (default: ETS_URL, else http://127.0.0.1:8080)'],
    ],
    notes: SERVICE_NOTE,
  },
  'overrides reject': {
    brief: 'reject a held transaction with a reason (a signed Refusal Record)',
    synopsis: ['overrides reject ID --key FILE --reason TEXT [--ttl SECONDS] [--url URL]'],
    summary: 'Reject a held transaction with a step-up envelope naming it, signed with your Ed25519 step-up key: nothing is released, a signed Refusal Record (matchedRuleId override-rejected) is stored. The held transaction is printed as JSON on stdout.',
    options: [
      ['ID', 'the businessTransactionId'],
      ['--key FILE', 'your Ed25519 step-up private key, PEM (never the API key)'],
      ['--reason TEXT', 'why (required; recorded as the rejection reason)'],
      ['--ttl SECONDS', 'how long the signed envelope is valid: 1 to 900 (default 300)'],
      ['--url URL', 'the service (default: ETS_URL, else http://127.0.0.1:8080)'],
    ],
    notes: SERVICE_NOTE,
  },
  policy: {
    synopsis: ['policy validate FILE'],
    summary: "Policy documents. Run 'ets policy validate --help'.",
  },
  'policy validate': {
    brief: 'validate a policy document (JSON or YAML); exit 0 if valid',
    synopsis: ['policy validate FILE'],
    summary: 'Validate a policy document (JSON or YAML) with the checks the service runs on a proposal; each error on its own line. Exit 0 only when valid.',
  },
  verify: {
    brief: 'verify a signed record (or a whole export with --all) offline with only the public keys',
    synopsis: ['verify FILE|- [--keys JWKS_FILE_OR_URL]', 'verify --all FILE|- [--keys JWKS_FILE_OR_URL] [--threads N]'],
    summary:
      'Verify a signed record offline, as the API served it (Trust Record, Refusal Record, Execution Intent, audit event, Verification, Receipt, attestation, attestation-simple answer, override resolution, runtime manifest, confirmation proof). ' +
      'With --all, FILE is an export (ets export, JSON Lines): its header, every record, that the lines are exactly the run of transparency-log leaves the header names (each leaf once, in order: none removed, repeated, moved or foreign), and the execution chain across its Trust Records.',
    options: [
      ['FILE|-', "the record as JSON; '-' reads stdin. The {intent, status} of GET /execution-intents/{id} and the response of POST /execute are unwrapped"],
      ['--all', "FILE is an export: verify every line, that no leaf of its run is missing, repeated or out of order, and that each Trust Record links to the one before it; print counts per kind and the first failure"],
      ['--keys SOURCE', 'a JWKS file, or the http(s) URL of /.well-known/jwks.json; default http://SVC_HOST:SVC_PORT/.well-known/jwks.json'],
      ['--threads N', "with --all: the threads that check records' signatures, hashes and proofs (default: every core); the order of the lines and the chain are checked on one"],
    ],
    notes: 'Exit 0 only when it verifies (with --all: every line, the whole run of leaves and the chain), 1 when it does not, 2 on usage or I/O errors.',
  },
  export: {
    brief: 'write a run of the transparency log with every signed record in it, as JSON Lines (for auditors)',
    synopsis: ['export [--since DATE] [--until DATE] > records.jsonl'],
    summary:
      'Write the signed records of the database the server uses (SVC_DATABASE_URL or SVC_DATA_DIR), read-only and from one snapshot, to stdout, in transparency-log order: ' +
      'a header line {"export": {"format", "checkpoint", "period"?, "leaves": {"first", "last"}}} naming the newest signed checkpoint and the run of its leaves the file holds, ' +
      'then one {"kind": …, "record": {…}, "transparency": {…}} per leaf of that run, each record with its inclusion proof in that checkpoint. ' +
      'Without a period the run is the whole log (leaves 0..size-1); leaves committed after the checkpoint are left for the next export. Progress on stderr.',
    options: [
      ['--since DATE', 'the run starts at the first leaf of a record stamped from this time on (a date, 2025-11-01, or a date-time with offset)'],
      ['--until DATE', 'the run ends at the last leaf of a record stamped before this time; records of other times whose leaves fall in the run are written too'],
    ],
    notes: "Runs beside a running server. Verify the file offline with 'ets verify --all FILE --keys jwks.json'.\n" + SETTINGS_NOTE,
  },
  backup: {
    brief: 'copy the embedded (SQLite) database while the server runs',
    synopsis: ['backup FILE'],
    summary:
      "Copy the embedded SQLite database (<data dir>/ets.sqlite) to FILE with SQLite's online backup API, consistently, while the server runs; then check the copy. " +
      'PostgreSQL is backed up with pg_dump (see the operator guide, "Deployment").',
    options: [['FILE', 'where to write the copy (must not exist)']],
    notes: 'Back up the data dir\'s keys/ (disk key provider) and the key file too. Restore: stop the server, copy FILE to <data dir>/ets.sqlite (remove ets.sqlite-wal and -shm), start.\n' + SETTINGS_NOTE,
  },
  log: {
    synopsis: ['log monitor --state FILE [--keys JWKS_FILE_OR_URL] URL'],
    summary: "The transparency log. Run 'ets log monitor --help'.",
  },
  'log monitor': {
    brief: 'check that a transparency log only grew since the last run',
    synopsis: ['log monitor --state FILE [--keys JWKS_FILE_OR_URL] URL'],
    summary: 'Check that the transparency log at URL only grew since the checkpoint saved in FILE (the first run trusts what it sees), and save the new checkpoint.',
    options: [
      ['--state FILE', 'where the last checked checkpoint is kept (required)'],
      ['--keys SOURCE', 'a JWKS file or URL with the log key; default the service at URL'],
      ['URL', "the service's address"],
    ],
    notes: 'Exit 0 consistent, 1 fork, rollback or bad signature, 2 log unreachable or usage errors.',
  },
  source: {
    synopsis: ['source serve …'],
    summary: "The reference business signal source. Run 'ets source serve --help'.",
  },
  'source serve': {
    brief: 'serve a reference business signal source from a JSON file of facts',
    synopsis: ['source serve --facts FILE --cert CERT.pem --cert-key CERT_KEY.pem [--key KEY.pem] [--host HOST] [--port PORT] [--valid-for SECONDS]'],
    summary:
      'Serve the reference business signal source over https: it answers the service\'s questions ({fact, subject, businessTransactionId, nonce}) from FILE and signs each answer with KEY (see the operator guide, "Business signal sources", for the protocol).',
    options: [
      ['--facts FILE', 'JSON: {"<fact>": {"<subject>": <value>}} or {"<fact>": {"<subject>": {"value": <value>, "validForSeconds": N}}}; read on every question'],
      ['--cert FILE', 'the TLS certificate (PEM) of the host name the source is registered with'],
      ['--cert-key FILE', 'its private key (PEM)'],
      ['--key FILE', 'the Ed25519 private key (PEM) answers are signed with; its public key and key id are printed at start (without it answers are unsigned)'],
      ['--host HOST', 'listen address (default 127.0.0.1)'],
      ['--port PORT', 'listen port (default 8443; 0 for any free port)'],
      ['--valid-for SECONDS', `how long an answer holds (validUntil), unless the facts file says (default ${300})`],
    ],
    notes: 'Stops on SIGINT or SIGTERM, and when the process that started it exits (npx ets …).',
  },
  'local-network': {
    brief: 'a resolver, a CA and certificates, to try sources and receivers on one machine',
    synopsis: ['local-network --dir DIR --name HOST [--name HOST …] [--dns-port PORT] [--address IP]'],
    summary:
      'Make what a business signal source or an external connector\'s receiver needs to be reached over HTTPS on this machine alone: ' +
      'a CA, a certificate for each host name (DIR/HOST.pem, key DIR/HOST-key.pem), and DIR/server.env, the server settings that use them ' +
      '(SVC_DNS_SERVERS, SVC_EGRESS_ALLOW_CIDRS=127.0.0.0/8, NODE_EXTRA_CA_CERTS); then answer the names with 127.0.0.1 from a resolver on loopback until stopped. ' +
      'For trying the service, never for a deployment.',
    options: [
      ['--dir DIR', 'where the CA, the certificates and server.env are written; run again with the same folder to serve the same names again'],
      ['--name HOST', 'a host name with a domain (erp.example.test); repeat it for more names'],
      ['--dns-port PORT', "the resolver's UDP port on 127.0.0.1 (default 8053)"],
      ['--address IP', 'what the names resolve to, where the source or receiver listens (default 127.0.0.1)'],
    ],
    notes: 'Start the server with the settings: env $(cat DIR/server.env) npm start. Stops on SIGINT or SIGTERM, and when the process that started it exits (npx ets …).',
  },
  quickstart: {
    brief: 'a sandbox service of its own, ready for a first executed and verified action',
    synopsis: ['quickstart [--dir DIR]'],
    summary:
      'Start a throwaway service in sandbox mode (SVC_SANDBOX=true) in a folder of its own, with an agent key and a sandbox approver, ' +
      'approve the shipped policy payments-transfer 1.0.0 as that approver with its step-up signature, and print a command that executes an action as the agent ' +
      'and verifies its signed record offline. Serves until stopped. For trying the service on one machine, never for a deployment: there, a second human approves with their own key.',
    options: [['--dir DIR', 'the folder for its database, signing keys, API keys and log (new or empty; default a new temporary folder)']],
    notes:
      'Listens on SVC_HOST:SVC_PORT (default 127.0.0.1:8080); every other setting is its own (sandbox mode, the embedded store in the folder). ' +
      'Stops on SIGINT or SIGTERM, and when the process that started it exits (npx ets …); the folder stays, to look at or delete.',
  },
  demo: {
    brief: 'a guided walk through the whole service (sandbox mode)',
    synopsis: [
      'demo --setup DIR [--dns-port PORT] [--receiver-port PORT] [--source-port PORT]',
      'demo --from DIR [--url URL]',
      'demo --url URL --alice-key KEY --alice-step-up PEM_FILE --bob-key KEY --bob-step-up PEM_FILE --agent-key KEY',
    ],
    summary: 'A guided walk through governance, execution, refusal, an external connector, a business signal source, an agent calling a tool through the MCP gateway (approved, refused, held until a human approves it), verification, receipt and offline verification.',
    options: [
      ['--setup DIR', "(server stopped) add the demo callers' keys to the key file, write their step-up keys, DIR/demo.env and the server's demo settings DIR/server.env"],
      ['--dns-port PORT', "with --setup: the UDP port of the demo's resolver on 127.0.0.1 (default: a free one, chosen at setup)"],
      ['--receiver-port PORT', 'with --setup: the port of the example receiver (default: any free one, when the demo runs)'],
      ['--source-port PORT', 'with --setup: the port of the business signal source (default: any free one, when the demo runs)'],
      ['--from DIR', '(server running: env $(cat DIR/server.env) npm start) run the demo with the keys of DIR/demo.env'],
      ['--url URL', 'the server (default http://SVC_HOST:SVC_PORT)'],
      ['--alice-key … --agent-key', 'the keys and step-up key files of the three demo callers, instead of --from'],
    ],
  },
};

/** `Usage: ets …` lines of one command, for usage errors. */
export function usageOf(command: string): string {
  const help = HELP[command];
  if (!help) throw new Error(`no help for '${command}'`);
  // A synopsis line that starts with spaces continues the one before it.
  return help.synopsis.map((s, i) => `${i === 0 ? 'Usage: ' : '       '}${s.startsWith(' ') ? '    ' : 'ets '}${s}`).join('\n');
}

/** The full help of one command. */
export function helpOf(command: string): string {
  const help = HELP[command]!;
  const lines = [usageOf(command), '', help.summary];
  if (help.options?.length) {
    const width = Math.max(...help.options.map(([flag]) => flag.length));
    lines.push('', 'Options:', ...help.options.map(([flag, meaning]) => `  ${flag.padEnd(width)}  ${meaning}`));
  }
  if (help.notes) lines.push('', help.notes);
  return lines.join('\n');
}

/** `ets --version`, and its aliases. */
export const VERSION_FLAGS = ['--version', '-V', '-v', 'version'];

export const TOP_LEVEL_HELP = [
  'Usage: ets <command> [options]',
  '       ets <command> [<subcommand>] --help    help of one command',
  '       ets --version (-V)                     the build identifier',
  '',
  'Commands:',
  // Every entry with a brief, in the table's order: each command, or each of its subcommands.
  ...Object.entries(HELP)
    .filter(([, h]) => h.brief !== undefined)
    .map(([c, h]) => `  ${c.padEnd(17)}  ${h.brief}`),
  '',
  // Outside the clone `npx ets` is the unrelated registry package of that name (npm's lookup); the
  // `npm --prefix` form and the launcher's path work from anywhere.
  "Run it in the clone: 'npx ets <command>' (from any folder of the clone) or 'npm run ets -- <command>'.",
  "Outside the clone 'npx ets' is an unrelated package of the npm registry: there, run",
  `'npm --prefix ${installRootWord()} run --silent ets -- <command>' (it runs in the clone's root, with its settings),`,
  `or 'node ${installRootWord()}/apps/server/bin/ets.js <command>'.`,
  SETTINGS_NOTE,
].join('\n');

/** The subcommands of a command (`keys` → add, remove, list); none for a command without. */
export const subcommandsOf = (command: string): string[] =>
  Object.keys(HELP)
    .filter((name) => name.startsWith(`${command} `))
    .map((name) => name.slice(command.length + 1));

/**
 * The command, or `command subcommand`, that `argv` (the arguments after `ets`) names. An unknown
 * command, or an unknown first argument of a command that has subcommands, is a usage error (exit 2).
 */
export function commandNamed(argv: string[]): string {
  const [command, sub] = argv;
  if (command === undefined || command.includes(' ') || !Object.prototype.hasOwnProperty.call(HELP, command)) {
    const what = command?.startsWith('-') ? 'option' : 'command';
    throw new CliError(`Unknown ${what} '${command ?? ''}'. Run 'ets --help' for the list of commands.`, 2);
  }
  const subs = subcommandsOf(command);
  if (subs.length === 0 || sub === undefined || sub.startsWith('-')) return command;
  if (!subs.includes(sub)) throw new CliError(`Unknown subcommand '${sub}' of 'ets ${command}' (${subs.join(', ')}). Run 'ets ${command} --help'.`, 2);
  return `${command} ${sub}`;
}

/**
 * The operator's stdio MCP servers (SVC_MCP_STDIO_SERVERS, CONTRACT "MCP gateway"): a JSON file
 * `{ "<name>": { "command": "…", "args": […], "env": {…} } }`. Only the operator, who can run
 * commands on the machine anyway, names a command; a registration (an HTTP body) names a server of
 * this file, never a command. Read and checked once at start: a broken file stops the start.
 */
import { readFileSync } from 'node:fs';
import { serverNameProblem } from '@ets/domain';

export interface StdioServerSpec {
  command: string;
  args: string[];
  /** What the child's environment holds beside the SDK's few defaults (PATH, HOME, LOGNAME, SHELL, TERM, USER). */
  env: Record<string, string>;
}

export class StdioServersFileError extends Error {
  override readonly name = 'StdioServersFileError';
}

const MAX_SERVERS = 100;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const FIELDS = ['command', 'args', 'env'];
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A value for argv or the environment: text without NUL (which no exec can pass). */
const isArgText = (v: unknown): v is string => typeof v === 'string' && v.length <= 8192 && !v.includes('\u0000');

/** Reads and checks the file; throws StdioServersFileError naming what is wrong (never a value of `env`). */
export function readStdioServersFile(file: string): Map<string, StdioServerSpec> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new StdioServersFileError(`cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new StdioServersFileError('it is not JSON: accepted is { "<name>": { "command": "…", "args": […], "env": {…} } }');
  }
  return readStdioServers(parsed);
}

export function readStdioServers(parsed: unknown): Map<string, StdioServerSpec> {
  if (!isObject(parsed)) throw new StdioServersFileError('it must be a JSON object of servers by name: { "<name>": { "command": "…", "args": […], "env": {…} } }');
  const names = Object.keys(parsed);
  if (names.length > MAX_SERVERS) throw new StdioServersFileError(`it names ${names.length} servers; at most ${MAX_SERVERS}`);
  const servers = new Map<string, StdioServerSpec>();
  for (const name of names) {
    const problem = serverNameProblem(name);
    if (problem) throw new StdioServersFileError(`server ${JSON.stringify(name.slice(0, 60))}: its name ${problem}`);
    const spec = parsed[name];
    const at = `server '${name}'`;
    if (!isObject(spec)) throw new StdioServersFileError(`${at} must be an object with "command" (and "args", "env")`);
    for (const field of Object.keys(spec)) if (!FIELDS.includes(field)) throw new StdioServersFileError(`${at}: "${field.slice(0, 60)}" is not a field (fields: ${FIELDS.join(', ')})`);
    if (!isArgText(spec.command) || spec.command.trim() === '') throw new StdioServersFileError(`${at}: "command" must be a non-empty string`);
    const args = spec.args ?? [];
    if (!Array.isArray(args) || !args.every(isArgText)) throw new StdioServersFileError(`${at}: "args" must be an array of strings`);
    const env = spec.env ?? {};
    if (!isObject(env)) throw new StdioServersFileError(`${at}: "env" must be an object of strings`);
    for (const [k, v] of Object.entries(env)) {
      if (!ENV_NAME.test(k)) throw new StdioServersFileError(`${at}: env name ${JSON.stringify(k.slice(0, 60))} must match ${ENV_NAME.source}`);
      if (!isArgText(v)) throw new StdioServersFileError(`${at}: env ${k} must be a string`);
    }
    servers.set(name, { command: spec.command, args: args as string[], env: env as Record<string, string> });
  }
  return servers;
}

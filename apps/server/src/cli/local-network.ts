import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { LoopbackDns, TestCertificateAuthority } from '@ets/loopback-network';
import { writeFileAtomic } from '../write-file-atomic.js';
import { CliError, codeOrMessage } from './errors.js';
import { stopWhenParentExits } from './parent-watch.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('local-network');
/** The resolver's port unless --dns-port says otherwise: fixed, so that server.env stays right across runs. */
export const DEFAULT_DNS_PORT = 8053;
const SETUP_FILE = 'network.json';
export const SERVER_ENV_FILE = 'server.env';
/** Outbound calls may reach loopback: where the local source and receiver listen. */
const LOOPBACK_RANGE = '127.0.0.0/8';
/** A host name with a domain, as the service accepts for an endpoint (`erp.example.test`). */
const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** What a folder set up by `ets local-network` (or `ets demo --setup`) holds. */
export interface LocalNetwork {
  dir: string;
  /** `127.0.0.1:PORT`, as SVC_DNS_SERVERS takes it. */
  dns: string;
  names: string[];
  /** The CA certificate the server trusts (NODE_EXTRA_CA_CERTS). */
  caFile: string;
  /** The settings a server needs to reach these names: SVC_DNS_SERVERS, SVC_EGRESS_ALLOW_CIDRS, NODE_EXTRA_CA_CERTS. */
  serverEnv: Record<string, string>;
}

/** The certificate and key files of one name in a local network's folder. */
export const certificateFiles = (dir: string, name: string): { cert: string; key: string } => ({
  cert: path.join(dir, `${name}.pem`),
  key: path.join(dir, `${name}-key.pem`),
});

/**
 * Writes a local network into `dir`: a CA made for it (`ca.pem`), a server certificate and key for
 * each name (`<name>.pem`, `<name>-key.pem`, the key 0600), and `server.env`, the settings that
 * make a server ask `dns` for names, allow loopback addresses for outbound calls, and trust the CA.
 * The CA's private key is never written: nothing else can be issued from it later.
 */
export async function writeLocalNetwork(dir: string, names: string[], dns: string): Promise<LocalNetwork> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ca = await TestCertificateAuthority.create('ets local network CA');
  const caFile = path.join(dir, 'ca.pem');
  writeFileSync(caFile, ca.certificatePem, { mode: 0o644 });
  for (const name of names) {
    const tls = await ca.issue([name], { validDays: 30 });
    const files = certificateFiles(dir, name);
    writeFileSync(files.cert, tls.cert, { mode: 0o644 });
    writeFileAtomic(files.key, tls.key, { mode: 0o600 });
  }
  const serverEnv = { SVC_DNS_SERVERS: dns, SVC_EGRESS_ALLOW_CIDRS: LOOPBACK_RANGE, NODE_EXTRA_CA_CERTS: caFile };
  // No comments, one setting a line: `env $(cat DIR/server.env) npm start` takes it as it is.
  writeFileSync(path.join(dir, SERVER_ENV_FILE), Object.entries(serverEnv).map(([k, v]) => `${k}=${v}\n`).join(''), { mode: 0o644 });
  writeFileSync(path.join(dir, SETUP_FILE), JSON.stringify({ dns, names }, null, 2) + '\n', { mode: 0o644 });
  return { dir, dns, names, caFile, serverEnv };
}

/** The local network already set up in `dir`, or undefined for a folder without one. */
export function readLocalNetwork(dir: string): LocalNetwork | undefined {
  const file = path.join(dir, SETUP_FILE);
  if (!existsSync(file)) return undefined;
  let setup: { dns?: unknown; names?: unknown };
  try {
    setup = JSON.parse(readFileSync(file, 'utf8')) as typeof setup;
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${codeOrMessage(e)}`, 2);
  }
  if (typeof setup.dns !== 'string' || !Array.isArray(setup.names) || !setup.names.every((n) => typeof n === 'string')) {
    throw new CliError(`${file} is not a local network's setup: use a new folder.`, 2);
  }
  const caFile = path.join(dir, 'ca.pem');
  return { dir, dns: setup.dns, names: setup.names as string[], caFile, serverEnv: { SVC_DNS_SERVERS: setup.dns, SVC_EGRESS_ALLOW_CIDRS: LOOPBACK_RANGE, NODE_EXTRA_CA_CERTS: caFile } };
}

/** Starts the resolver at `dns` (`ip:port`), answering each name with `address`. */
export async function startResolver(dns: string, names: string[], address: string): Promise<LoopbackDns> {
  const colon = dns.lastIndexOf(':');
  const host = dns.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(dns.slice(colon + 1));
  let resolver: LoopbackDns;
  try {
    resolver = await LoopbackDns.start({ host, port });
  } catch (e) {
    throw new CliError(`the resolver cannot listen on ${dns} (UDP): ${codeOrMessage(e)}${codeOrMessage(e) === 'EADDRINUSE' ? ' (is it running already, in another terminal?)' : ''}`, 1);
  }
  for (const name of names) resolver.set(name, net.isIPv6(address) ? { AAAA: [address] } : { A: [address] });
  return resolver;
}

/** A port option: a whole number from `min` to 65535, or the default. */
export function portOption(value: string | undefined, flag: string, fallback: number, usage: string, min = 1): number {
  if (value === undefined) return fallback;
  const port = Number(value);
  if (!/^\d+$/.test(value) || port < min || port > 65535) throw new CliError(`${flag} must be a port number (${min} to 65535). ${usage}`, 2);
  return port;
}

/**
 * `ets local-network --dir DIR --name HOST…`: everything a business signal source or an external
 * connector's receiver needs to be reached over HTTPS on this one machine, where no public DNS
 * name or certificate exists for it: a resolver on loopback that answers the names with
 * 127.0.0.1, a CA, a certificate for each name, and the server settings that use them. Serves the
 * resolver until stopped; run again with the same folder, it serves the same names again.
 */
export async function localNetworkCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { dir: { type: 'string' }, name: { type: 'string', multiple: true }, 'dns-port': { type: 'string' }, address: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new CliError(`Unexpected argument '${positionals[0]}'.\n${USAGE}`, 2);
  if (!values.dir || values.dir.trim() === '') throw new CliError(`--dir is required (the folder for the CA, the certificates and server.env).\n${USAGE}`, 2);
  const names = [...new Set((values.name ?? []).map((n) => n.toLowerCase()))];
  if (names.length === 0) throw new CliError(`--name is required: the host name of a source or receiver (e.g. erp.example.test); repeat it for more.\n${USAGE}`, 2);
  const bad = names.find((n) => !HOST_NAME.test(n));
  if (bad) throw new CliError(`--name ${bad} is not a host name with a domain (e.g. erp.example.test).`, 2);
  const address = values.address ?? '127.0.0.1';
  if (!net.isIP(address)) throw new CliError(`--address must be an IP address of this machine (default 127.0.0.1).`, 2);
  const dir = path.resolve(values.dir);

  let network = readLocalNetwork(dir);
  if (network) {
    const missing = names.filter((n) => !network!.names.includes(n));
    if (missing.length > 0) {
      throw new CliError(`${dir} was set up for ${network.names.join(', ')}, not ${missing.join(', ')}: use a new folder (and restart the server with its ${SERVER_ENV_FILE}).`, 2);
    }
    if (values['dns-port'] !== undefined && !network.dns.endsWith(`:${values['dns-port']}`)) {
      throw new CliError(`${dir} was set up with the resolver at ${network.dns}: use a new folder for another port.`, 2);
    }
  } else {
    const port = portOption(values['dns-port'], '--dns-port', DEFAULT_DNS_PORT, USAGE);
    // The resolver must be free before anything is written: a folder that names a port in use is of no use.
    await (await startResolver(`127.0.0.1:${port}`, [], address)).close();
    network = await writeLocalNetwork(dir, names, `127.0.0.1:${port}`);
  }
  const resolver = await startResolver(network.dns, network.names, address);
  const serverEnvFile = path.join(dir, SERVER_ENV_FILE);
  process.stdout.write(
    [
      `Local network for trying sources and receivers on this machine only (never for a deployment): ${network.dir}`,
      `  resolver      ${network.dns} (UDP) answers ${network.names.join(', ')} with ${address}, while this command runs`,
      `  CA            ${network.caFile}`,
      ...network.names.map((n) => `  certificate   ${certificateFiles(dir, n).cert} (key ${path.basename(certificateFiles(dir, n).key)}) for ${n}`),
      `  server.env    ${serverEnvFile}: ${Object.entries(network.serverEnv).map(([k, v]) => `${k}=${v}`).join(' ')}`,
      `Start the server with these settings (they are read at start): env $(cat ${serverEnvFile}) npm start`,
      'Ctrl-C stops the resolver.',
      '',
    ].join('\n'),
  );
  const stop = () => void resolver.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  stopWhenParentExits(stop);
  await new Promise<never>(() => undefined);
}

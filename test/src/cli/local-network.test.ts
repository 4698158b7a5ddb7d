import { afterAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { runCli, startCli, tempDirs, type StartedCli } from '@ets/test-support';

// Needs the built CLI (`npm run build`). The walkthrough that uses it end to end (a source reached
// over HTTPS through it) is the guide's business-validation walkthrough, run by fresh-clone.test.ts.
const tmp = tempDirs('ets-local-network-');

const freeUdpPort = (): Promise<number> =>
  new Promise((resolve) => {
    const socket = dgram.createSocket('udp4');
    socket.bind(0, '127.0.0.1', () => {
      const { port } = socket.address();
      socket.close(() => resolve(port));
    });
  });

type Running = StartedCli<true>;

const startNetwork = (args: string[]): Promise<Running> => startCli(['local-network', ...args], {}, (out) => (out.includes('Ctrl-C stops the resolver.') ? true : undefined), 30_000);

describe('ets local-network', () => {
  const running: Running[] = [];
  afterAll(async () => {
    for (const r of running) await r.stop();
  });

  it('writes a CA, a certificate per name and server.env, and answers the names from its resolver until stopped; run again, it serves the same', async () => {
    const dir = path.join(tmp(), 'net');
    const port = await freeUdpPort();
    const names = ['erp.example.test', 'payments.example.test'];
    const net = await startNetwork(['--dir', dir, '--name', names[0]!, '--name', names[1]!, '--dns-port', String(port)]);
    running.push(net);
    expect(net.output()).toContain(`resolver      127.0.0.1:${port} (UDP) answers erp.example.test, payments.example.test with 127.0.0.1`);
    expect(net.output()).toContain(`env $(cat ${path.join(dir, 'server.env')}) npm start`);

    expect(parseDotenv(readFileSync(path.join(dir, 'server.env'), 'utf8'))).toEqual({
      SVC_DNS_SERVERS: `127.0.0.1:${port}`,
      SVC_EGRESS_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: path.join(dir, 'ca.pem'),
    });
    const ca = new X509Certificate(readFileSync(path.join(dir, 'ca.pem')));
    expect(ca.ca).toBe(true);
    for (const name of names) {
      const cert = new X509Certificate(readFileSync(path.join(dir, `${name}.pem`)));
      expect(cert.checkHost(name)).toBe(name);
      expect(cert.verify(ca.publicKey)).toBe(true);
      expect(statSync(path.join(dir, `${name}-key.pem`)).mode & 0o777).toBe(0o600);
    }

    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([`127.0.0.1:${port}`]);
    expect(await resolver.resolve4('erp.example.test')).toEqual(['127.0.0.1']);
    await expect(resolver.resolve4('other.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });

    expect(await net.stop()).toBe(0);
    await expect(resolver.resolve4('erp.example.test')).rejects.toBeDefined();

    // The same folder again: the same CA (the server trusts it already), the same resolver.
    const caBefore = readFileSync(path.join(dir, 'ca.pem'), 'utf8');
    const again = await startNetwork(['--dir', dir, '--name', 'erp.example.test']);
    running.push(again);
    expect(readFileSync(path.join(dir, 'ca.pem'), 'utf8')).toBe(caBefore);
    expect(await resolver.resolve4('payments.example.test')).toEqual(['127.0.0.1']);
    expect(await again.stop()).toBe(0);
  }, 90_000);

  it('refuses what it cannot serve, naming it (exit 2): no name, a name without a domain, a new name for a folder set up, a port in use', async () => {
    const dir = path.join(tmp(), 'net');
    expect((await runCli(['local-network', '--dir', dir], {})).stderr).toMatch(/--name is required/);
    expect((await runCli(['local-network', '--name', 'erp.example.test'], {})).stderr).toMatch(/--dir is required/);
    const bare = await runCli(['local-network', '--dir', dir, '--name', 'erp'], {});
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/--name erp is not a host name with a domain/);

    const port = await freeUdpPort();
    const net = await startNetwork(['--dir', dir, '--name', 'erp.example.test', '--dns-port', String(port)]);
    running.push(net);
    const other = await runCli(['local-network', '--dir', dir, '--name', 'crm.example.test'], {});
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/was set up for erp\.example\.test, not crm\.example\.test: use a new folder/);
    const busy = await runCli(['local-network', '--dir', path.join(tmp(), 'busy'), '--name', 'crm.example.test', '--dns-port', String(port)], {});
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(new RegExp(`the resolver cannot listen on 127\\.0\\.0\\.1:${port} \\(UDP\\): EADDRINUSE`));
    expect(await net.stop()).toBe(0);
  }, 90_000);
});

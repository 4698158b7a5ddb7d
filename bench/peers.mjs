#!/usr/bin/env node
// The outside world of `npm run bench`, in a process of its own (so the load generator's process
// does no TLS or signing for them): a DNS server on loopback whose names the service resolves
// through SVC_DNS_SERVERS, a CA whose certificate the service trusts through NODE_EXTRA_CA_CERTS,
// the reference business signal source (`ets source serve`'s code, signing every answer), and the
// example release receiver of packages/release-receiver (verifying every release with the
// service's JWKS). Nothing here skips the service's egress rules: the names resolve to 127.x
// addresses that the service reaches only because SVC_EGRESS_ALLOW_CIDRS allows 127.0.0.0/8.
//
// Usage: node bench/peers.mjs DIR SERVICE_URL
// Writes DIR/ca.pem, DIR/facts.json and prints one JSON line (the peers' addresses and the
// source's public key) on stdout once everything listens; stops on SIGTERM.
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { LoopbackDns, TestCertificateAuthority } from '@ets/loopback-network';
import { startExampleReceiver } from '@ets/release-receiver';
import { readSigningKey, startReferenceSource } from '../apps/server/dist/signal-source/reference-source.js';

const [dir, serviceUrl] = process.argv.slice(2);
const SOURCE_HOST = 'erp.bench.test';
const RECEIVER_HOST = 'receiver.bench.test';

const dns = await LoopbackDns.start();
const ca = await TestCertificateAuthority.create('ets bench CA');
const caFile = path.join(dir, 'ca.pem');
writeFileSync(caFile, ca.certificatePem);

// Every invoice the sourced-signal scenario asks about has an amount of 120.
const factsFile = path.join(dir, 'facts.json');
writeFileSync(factsFile, JSON.stringify({ 'invoice.amount': Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`inv-${i}`, 120])) }));
const { privateKey } = generateKeyPairSync('ed25519');
const key = readSigningKey(privateKey.export({ type: 'pkcs8', format: 'pem' }));

const source = await startReferenceSource({ factsFile, key, tls: await ca.issue([SOURCE_HOST]), host: '127.0.0.2', port: 0, validForSeconds: 300 });
dns.set(SOURCE_HOST, { A: [source.address] });
const receiver = await startExampleReceiver({ tls: await ca.issue([RECEIVER_HOST]), hostName: RECEIVER_HOST, address: '127.0.0.3', jwks: `${serviceUrl}/.well-known/jwks.json` });
dns.set(RECEIVER_HOST, { A: [receiver.address] });
// The receiver keeps what it executed (for the demo and the tests): not for a load run.
setInterval(() => {
  receiver.executed.length = 0;
  receiver.answers.length = 0;
}, 1000).unref();

console.log(
  JSON.stringify({
    dns: dns.address,
    caFile,
    source: { endpoint: `https://${SOURCE_HOST}:${source.port}/`, publicKeyPem: key.publicKeyPem },
    receiver: { endpoint: receiver.endpoint },
  }),
);
process.once('SIGTERM', () => void Promise.all([source.close(), receiver.close(), dns.close()]).then(() => process.exit(0)));

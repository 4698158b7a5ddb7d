#!/usr/bin/env node
// Throwaway SoftHSM2 tokens for the pkcs11 key provider's tests and the benchmark: a softhsm2.conf
// with its own token directory under DIR (point SOFTHSM2_CONF at it), and tokens in it, each with a
// label and a user PIN. Installs the Debian package softhsm2 first when it is missing (CI and the
// developers' machines run as root; .ci/run installs it up front).
//
//   node scripts/softhsm-token.mjs DIR [LABEL] [PIN]   prints {"module","conf","label","pin"} as JSON
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MODULE_CANDIDATES = [
  '/usr/lib/softhsm/libsofthsm2.so',
  `/usr/lib/${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu/softhsm/libsofthsm2.so`,
  '/usr/local/lib/softhsm/libsofthsm2.so',
];

export function findSoftHsmModule() {
  return [process.env.ETS_SOFTHSM2_MODULE, ...MODULE_CANDIDATES].find((file) => file && existsSync(file));
}

/** The module's path, installing softhsm2 with apt-get when it is not there. */
export function ensureSoftHsm() {
  const found = findSoftHsmModule();
  if (found && hasUtil()) return found;
  const apt = (args) =>
    execFileSync('apt-get', ['-o', 'DPkg::Lock::Timeout=300', '-q', '-y', ...args], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  try {
    apt(['install', 'softhsm2']);
  } catch {
    apt(['update']);
    apt(['install', 'softhsm2']);
  }
  const installed = findSoftHsmModule();
  if (!installed || !hasUtil()) throw new Error('softhsm2 is installed but its module or softhsm2-util was not found');
  return installed;
}

/** A softhsm2.conf in DIR whose token directory is DIR/tokens (kept when it is there already). */
export function writeSoftHsmConf(dir) {
  const tokens = path.join(dir, 'tokens');
  mkdirSync(tokens, { recursive: true, mode: 0o700 });
  const conf = path.join(dir, 'softhsm2.conf');
  if (!existsSync(conf)) writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`);
  return conf;
}

/** Initialises a token in the token directory of CONF; returns what SVC_PKCS11_* and SOFTHSM2_CONF need. */
export function initSoftHsmToken(conf, { label = 'ets-test', pin = '246810', soPin = '13579111' } = {}) {
  const module = ensureSoftHsm();
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--so-pin', soPin, '--pin', pin], {
    env: { ...process.env, SOFTHSM2_CONF: conf },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return { module, conf, label, pin };
}

function hasUtil() {
  try {
    execFileSync('softhsm2-util', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [dir, label, pin] = process.argv.slice(2);
  if (!dir) {
    process.stderr.write('Usage: node scripts/softhsm-token.mjs DIR [LABEL] [PIN]\n');
    process.exit(2);
  }
  const conf = writeSoftHsmConf(path.resolve(dir));
  process.stdout.write(JSON.stringify(initSoftHsmToken(conf, { ...(label ? { label } : {}), ...(pin ? { pin } : {}) })) + '\n');
}

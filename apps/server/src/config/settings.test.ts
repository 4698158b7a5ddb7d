import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadSettings } from './settings.js';

describe('egress settings (CONTRACT "Egress")', () => {
  it('defaults: the system resolver, no allowed ranges, no extra CA, issuer ets', () => {
    expect(loadSettings({}, '/tmp')).toMatchObject({ egress: { dnsServers: undefined, allowCidrs: [] }, issuer: 'ets' });
    expect(loadSettings({}, '/tmp').egress.extraCa).toBeUndefined();
  });

  it('reads SVC_DNS_SERVERS, SVC_EGRESS_ALLOW_CIDRS, NODE_EXTRA_CA_CERTS (relative to the working directory) and SVC_ISSUER', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-settings-'));
    try {
      writeFileSync(path.join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
      const s = loadSettings({ SVC_DNS_SERVERS: '127.0.0.1:5353, [::1]:53', SVC_EGRESS_ALLOW_CIDRS: '127.0.0.0/8, fd00::/8', NODE_EXTRA_CA_CERTS: 'ca.pem', SVC_ISSUER: 'ets-prod' }, dir);
      expect(s.egress).toEqual({
        dnsServers: ['127.0.0.1:5353', '[::1]:53'],
        allowCidrs: ['127.0.0.0/8', 'fd00::/8'],
        extraCa: { file: path.join(dir, 'ca.pem'), pem: expect.stringContaining('BEGIN CERTIFICATE') },
      });
      expect(s.issuer).toBe('ets-prod');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ SVC_DNS_SERVERS: 'dns.example.com' }, /SVC_DNS_SERVERS/],
    [{ SVC_DNS_SERVERS: ',' }, /SVC_DNS_SERVERS: no resolver/],
    [{ SVC_EGRESS_ALLOW_CIDRS: '10.0.0.0/33' }, /SVC_EGRESS_ALLOW_CIDRS/],
    [{ SVC_EGRESS_ALLOW_CIDRS: 'everything' }, /SVC_EGRESS_ALLOW_CIDRS/],
    [{ NODE_EXTRA_CA_CERTS: '/nonexistent/ca.pem' }, /NODE_EXTRA_CA_CERTS.*ENOENT/],
    [{ NODE_EXTRA_CA_CERTS: '/etc/hostname' }, /NODE_EXTRA_CA_CERTS.*PEM/],
    [{ SVC_ISSUER: 'has space' }, /SVC_ISSUER/],
  ])('refuses %j with one line naming the setting', (env, message) => {
    expect(() => loadSettings(env, '/tmp')).toThrow(ConfigError);
    expect(() => loadSettings(env, '/tmp')).toThrow(message);
  });
});

describe('the transparency log origin (SVC_LOG_ORIGIN)', () => {
  it('defaults to <SVC_ISSUER>/log and takes any one visible ASCII line', () => {
    expect(loadSettings({}, '/tmp').logOrigin).toBe('ets/log');
    expect(loadSettings({ SVC_ISSUER: 'ets-prod' }, '/tmp').logOrigin).toBe('ets-prod/log');
    expect(loadSettings({ SVC_ISSUER: 'ets-prod', SVC_LOG_ORIGIN: 'ets.example.com/log' }, '/tmp').logOrigin).toBe('ets.example.com/log');
  });

  it.each(['has space', 'é', 'x'.repeat(257)])('refuses %j with one line naming the setting', (origin) => {
    expect(() => loadSettings({ SVC_LOG_ORIGIN: origin }, '/tmp')).toThrow(/^Invalid setting SVC_LOG_ORIGIN=/);
  });

  it('says what SVC_ISSUER and SVC_LOG_ORIGIN accept, and reports the issuer first, as it is read first', () => {
    expect(() => loadSettings({ SVC_LOG_ORIGIN: 'a b' }, '/tmp')).toThrow(
      new ConfigError('Invalid setting SVC_LOG_ORIGIN="a b": accepted values are 1 to 256 visible ASCII characters, such as ets.example.com/log.'),
    );
    expect(() => loadSettings({ SVC_ISSUER: 'a b', SVC_SOURCE_TIMEOUT_MS: '1', SVC_LOG_ORIGIN: 'c d' }, '/tmp')).toThrow(
      new ConfigError('Invalid setting SVC_ISSUER="a b": accepted values are 1 to 256 visible ASCII characters.'),
    );
    expect(() => loadSettings({ SVC_SOURCE_TIMEOUT_MS: '1', SVC_LOG_ORIGIN: 'c d' }, '/tmp')).toThrow(/^Invalid setting SVC_SOURCE_TIMEOUT_MS=/);
  });
});

describe('metrics settings', () => {
  it('are off without SVC_METRICS_PORT; SVC_METRICS_HOST defaults to loopback', () => {
    expect(loadSettings({}, '/tmp').metrics).toBeUndefined();
    expect(loadSettings({ SVC_METRICS_PORT: '9464' }, '/tmp').metrics).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(loadSettings({ SVC_METRICS_PORT: '0', SVC_METRICS_HOST: '0.0.0.0' }, '/tmp').metrics).toEqual({ host: '0.0.0.0', port: 0 });
  });

  it.each([
    [{ SVC_METRICS_PORT: 'x' }, /^Invalid setting SVC_METRICS_PORT="x": accepted values are whole numbers from 0 to 65535\.$/],
    [{ SVC_METRICS_PORT: '70000' }, /SVC_METRICS_PORT/],
    [{ SVC_METRICS_PORT: '9464', SVC_METRICS_HOST: 'a b' }, /^Invalid setting SVC_METRICS_HOST="a b"/],
    [{ SVC_METRICS_HOST: '127.0.0.1' }, /^Invalid setting SVC_METRICS_HOST: it needs SVC_METRICS_PORT/],
  ])('refuses %j with one line naming the setting', (env, message) => {
    expect(() => loadSettings(env, '/tmp')).toThrow(ConfigError);
    expect(() => loadSettings(env, '/tmp')).toThrow(message);
  });
});

describe('SVC_GRANT_MAX_DAYS', () => {
  it('defaults to 366 days and takes 1 to 3660', () => {
    expect(loadSettings({}, '/tmp').grantMaxDays).toBe(366);
    expect(loadSettings({ SVC_GRANT_MAX_DAYS: '30' }, '/tmp').grantMaxDays).toBe(30);
    expect(loadSettings({ SVC_GRANT_MAX_DAYS: '3660' }, '/tmp').grantMaxDays).toBe(3660);
  });

  it.each(['0', '3661', '1.5', '-1', 'a year'])('refuses %j with one line naming the setting', (days) => {
    expect(() => loadSettings({ SVC_GRANT_MAX_DAYS: days }, '/tmp')).toThrow(
      new ConfigError(`Invalid setting SVC_GRANT_MAX_DAYS=${JSON.stringify(days)}: accepted values are whole numbers from 1 to 3660.`),
    );
  });
});

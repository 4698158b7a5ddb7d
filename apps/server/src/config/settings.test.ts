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

describe('notification settings (CONTRACT "Notifications")', () => {
  const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

  it('are off without SVC_NOTIFY_WEBHOOK_URLS; SVC_PUBLIC_URL defaults to the listen address', () => {
    expect(loadSettings({}, '/tmp')).toMatchObject({ notifications: undefined, publicUrl: 'http://127.0.0.1:8080' });
    expect(loadSettings({ SVC_HOST: '::1', SVC_PORT: '9000' }, '/tmp').publicUrl).toBe('http://[::1]:9000');
  });

  it('reads the endpoints (normalised, each once) and the secret; SVC_PUBLIC_URL without its trailing slash', () => {
    const s = loadSettings(
      { SVC_NOTIFY_WEBHOOK_URLS: 'https://Hooks.Example.com/a?t=1, https://other.example.org:8443/b,https://hooks.example.com/a?t=1', SVC_NOTIFY_WEBHOOK_SECRET: SECRET, SVC_PUBLIC_URL: 'https://ets.example.com/approvals/' },
      '/tmp',
    );
    expect(s.notifications).toEqual({ endpoints: ['https://hooks.example.com/a?t=1', 'https://other.example.org:8443/b'], secret: SECRET });
    expect(s.publicUrl).toBe('https://ets.example.com/approvals');
  });

  it.each([
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'http://hooks.example.com/a?token=SECRETPATH' }, /SVC_NOTIFY_WEBHOOK_URLS: entry 1 must use https/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://hooks.example.com/a, https://127.0.0.1/SECRETPATH' }, /entry 2 must name its host, not an IP address/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://localhost/SECRETPATH' }, /entry 1 must not name localhost/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://u:SECRETPATH@hooks.example.com/' }, /entry 1 must not carry a user name or password/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://hooks.example.com/a,,' }, /entry 2 is empty/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://hooks.example.com/SECRETPATH' }, /Missing setting SVC_NOTIFY_WEBHOOK_SECRET/],
    [{ SVC_NOTIFY_WEBHOOK_SECRET: SECRET }, /SVC_NOTIFY_WEBHOOK_SECRET: it needs SVC_NOTIFY_WEBHOOK_URLS/],
    [{ SVC_NOTIFY_WEBHOOK_SECRET: 'SECRETPATHSECRETPATHSECRETPATHSECRETPATH' }, /SVC_NOTIFY_WEBHOOK_SECRET: it needs/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://hooks.example.com/a', SVC_NOTIFY_WEBHOOK_SECRET: 'SECRETPATHSECRETPATHSECRETPATHSECRETPATH' }, /SVC_NOTIFY_WEBHOOK_SECRET: it must start with whsec_/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://hooks.example.com/a', SVC_NOTIFY_WEBHOOK_SECRET: 'whsec_SECRETPATH!!' }, /standard base64/],
    [{ SVC_NOTIFY_WEBHOOK_URLS: 'https://hooks.example.com/a', SVC_NOTIFY_WEBHOOK_SECRET: `whsec_${Buffer.alloc(16).toString('base64')}` }, /24 to 64 bytes \(it holds 16\)/],
    [{ SVC_PUBLIC_URL: 'ftp://ets.example.com' }, /SVC_PUBLIC_URL/],
    [{ SVC_PUBLIC_URL: 'https://ets.example.com/?x=1' }, /SVC_PUBLIC_URL/],
    [{ SVC_PUBLIC_URL: 'https://ets.example.com/#x' }, /SVC_PUBLIC_URL/],
    [{ SVC_PUBLIC_URL: 'not a url' }, /SVC_PUBLIC_URL/],
  ])('refuses %j with one line naming the setting, never quoting a webhook URL or the secret', (env, message) => {
    expect(() => loadSettings(env, '/tmp')).toThrow(ConfigError);
    expect(() => loadSettings(env, '/tmp')).toThrow(message);
    let text = '';
    try {
      loadSettings(env, '/tmp');
    } catch (e) {
      text = (e as Error).message;
    }
    expect(text).not.toContain('SECRETPATH');
    expect(text).not.toContain(SECRET);
    expect(text.split('\n')).toHaveLength(1);
  });
});

describe('MCP gateway settings (CONTRACT "MCP gateway")', () => {
  const withFile = (content: string, run: (file: string) => void) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-mcp-settings-'));
    try {
      writeFileSync(path.join(dir, 'stdio.json'), content);
      run(path.join(dir, 'stdio.json'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('defaults: no stdio servers, no browser origin', () => {
    expect(loadSettings({}, '/tmp').mcp).toEqual({ stdioServers: new Map(), allowedOrigins: [], holdSeconds: 120 });
  });

  it('reads SVC_MCP_STDIO_SERVERS (args and env optional) and SVC_MCP_ALLOWED_ORIGINS', () => {
    withFile(JSON.stringify({ everything: { command: 'node', args: ['server.js', 'stdio'], env: { LEVEL: 'debug' } }, plain: { command: '/usr/bin/tool' } }), (file) => {
      const s = loadSettings({ SVC_MCP_STDIO_SERVERS: file, SVC_MCP_ALLOWED_ORIGINS: 'https://App.example.com, http://localhost:6274/' }, '/tmp');
      expect([...s.mcp.stdioServers]).toEqual([
        ['everything', { command: 'node', args: ['server.js', 'stdio'], env: { LEVEL: 'debug' } }],
        ['plain', { command: '/usr/bin/tool', args: [], env: {} }],
      ]);
      expect(s.mcp.allowedOrigins).toEqual(['https://app.example.com', 'http://localhost:6274']);
    });
  });

  it.each([
    ['not JSON', '{', /not JSON/],
    ['an array', '[]', /JSON object of servers/],
    ['a bad name', JSON.stringify({ 'Bad Name': { command: 'x' } }), /its name/],
    ['no command', JSON.stringify({ srv: { args: [] } }), /"command" must be a non-empty string/],
    ['args not strings', JSON.stringify({ srv: { command: 'x', args: [1] } }), /"args" must be an array of strings/],
    ['env not strings', JSON.stringify({ srv: { command: 'x', env: { TOKEN: 1 } } }), /env TOKEN must be a string/],
    ['an unknown field', JSON.stringify({ srv: { command: 'x', cwd: '/' } }), /"cwd" is not a field/],
  ])('refuses a stdio servers file with %s, in one line naming the setting (never an env value)', (_what, content, message) => {
    withFile(content, (file) => {
      expect(() => loadSettings({ SVC_MCP_STDIO_SERVERS: file }, '/tmp')).toThrow(ConfigError);
      expect(() => loadSettings({ SVC_MCP_STDIO_SERVERS: file }, '/tmp')).toThrow(message);
      expect(() => loadSettings({ SVC_MCP_STDIO_SERVERS: file }, '/tmp')).toThrow(/^Invalid setting SVC_MCP_STDIO_SERVERS=/);
    });
    withFile(JSON.stringify({ srv: { command: 'x', env: { TOKEN: 's3cret-value', BAD: 7 } } }), (file) => {
      expect(() => loadSettings({ SVC_MCP_STDIO_SERVERS: file }, '/tmp')).toThrow(expect.objectContaining({ message: expect.not.stringContaining('s3cret') }));
    });
  });

  it('refuses a missing file and origins that are not origins', () => {
    expect(() => loadSettings({ SVC_MCP_STDIO_SERVERS: '/nonexistent/stdio.json' }, '/tmp')).toThrow(/SVC_MCP_STDIO_SERVERS.*ENOENT/);
    for (const o of ['app.example.com', 'https://app.example.com/path', 'ftp://x.example.com', '*']) {
      expect(() => loadSettings({ SVC_MCP_ALLOWED_ORIGINS: o }, '/tmp')).toThrow(/SVC_MCP_ALLOWED_ORIGINS/);
    }
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

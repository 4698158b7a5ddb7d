import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { readEndpoint } from './endpoint.js';

const problem = (raw: unknown): string | undefined => {
  const r = readEndpoint(raw);
  return r.ok ? undefined : r.problem;
};

describe('endpoint rules (spec 2.5)', () => {
  it('accepts an https URL with a host name and a domain, normalised by URL parsing', () => {
    expect(readEndpoint('HTTPS://API.Example.COM:443/a/../release?x=1')).toEqual({
      ok: true,
      endpoint: { url: 'https://api.example.com/release?x=1', host: 'api.example.com', port: 443, path: '/release?x=1' },
    });
    expect(readEndpoint('https://receiver.ets.test:8443')).toMatchObject({ ok: true, endpoint: { url: 'https://receiver.ets.test:8443/', port: 8443, path: '/' } });
    // The ends of the port range (CONTRACT "Review rules, round 2": 1 to 65535).
    expect(readEndpoint('https://receiver.ets.test:1/x')).toMatchObject({ ok: true, endpoint: { port: 1 } });
    expect(readEndpoint('https://receiver.ets.test:65535/x')).toMatchObject({ ok: true, endpoint: { port: 65535 } });
    expect(readEndpoint('https://bücher.example/x')).toMatchObject({ ok: true, endpoint: { host: 'xn--bcher-kva.example' } });
  });

  it.each([
    // IPv4 in every spelling the URL parser accepts
    'https://127.0.0.1/', 'https://2130706433/', 'https://0177.0.0.1/', 'https://0x7f000001/', 'https://0x7f.0.0.1/', 'https://127.1/',
    'https://127.0.1/', 'https://017700000001/', 'https://0x7F.1/', 'https://10.0.0.1:8443/x', 'https://169.254.169.254/latest/meta-data',
    'https://0.0.0.0/', 'https://8.8.8.8/', 'https://%31%32%37.0.0.1/', 'https://１２７.0.0.1/',
    // IPv6 in every spelling
    'https://[::1]/', 'https://[0:0:0:0:0:0:0:1]/', 'https://[::]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/',
    'https://[64:ff9b::7f00:1]/', 'https://[64:ff9b::127.0.0.1]/', 'https://[2002:7f00:1::]/', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
    'https://[::127.0.0.1]/', 'https://[fe80::1]/', 'https://[fd00::1]/', 'https://[2606:4700::1111]/',
  ])('refuses the IP literal %s', (url) => {
    expect(problem(url)).toBe('must name its host, not an IP address.');
  });

  it.each([
    ['https://localhost/', 'must not name localhost.'],
    ['https://LOCALHOST:8443/', 'must not name localhost.'],
    ['https://api.localhost/', 'must not name localhost.'],
    ['https://localhost.localdomain/', 'must not name localhost.'],
    ['https://ｌｏｃａｌｈｏｓｔ/', 'must not name localhost.'],
    ['https://intranet/', 'must have a host name with a domain (such as api.example.com).'],
    ['https://example.com./', 'must not end its host name with a dot.'],
    ['http://api.example.com/', 'must use https.'],
    ['ftp://api.example.com/', 'must use https.'],
    ['file:///etc/passwd', 'must use https.'],
    ['https://user@api.example.com/', 'must not carry a user name or password.'],
    ['https://user:secret@api.example.com/', 'must not carry a user name or password.'],
    ['https://:secret@api.example.com/', 'must not carry a user name or password.'],
    ['https://api.example.com/#top', 'must not have a fragment.'],
    ['https://api.example.com/#', 'must not have a fragment.'],
    ['https://api.exa mple.com/', 'must not contain spaces or control characters.'],
    ['https://api.example.com/\n', 'must not contain spaces or control characters.'],
    [' https://api.example.com/', 'must not contain spaces or control characters.'],
    ['https://api.example.com\t.evil/', 'must not contain spaces or control characters.'],
    ['https://api.example.com:0/', 'must have a port from 1 to 65535.'],
    ['https://api.example.com:00/', 'must have a port from 1 to 65535.'],
    ['https://api.example.com:00000/x', 'must have a port from 1 to 65535.'],
    ['https://api.example.com:65536/', 'must have a port from 1 to 65535.'],
    ['https://api.example.com:99999?x=1', 'must have a port from 1 to 65535.'],
    ['https://api.example.com:4294967297/', 'must have a port from 1 to 65535.'],
    ['https://', 'is not a URL.'],
    ['api.example.com', 'is not a URL.'],
    ['https://1.2.3.4.5/', 'is not a URL.'],
    ['', 'is required: an https URL.'],
    [42, 'is required: an https URL.'],
    [null, 'is required: an https URL.'],
    [`https://api.example.com/${'a'.repeat(2048)}`, 'must be at most 2048 characters.'],
  ])('refuses %j: endpoint %s', (raw, expected) => {
    expect(problem(raw)).toBe(expected);
  });

  it('refuses every IPv4 address in every numeric spelling (decimal, octal, hex, short forms)', () => {
    const spellings = (n: number): string[] => {
      const b = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
      return [
        String(n),
        `0x${n.toString(16)}`,
        `0${n.toString(8)}`,
        b.join('.'),
        b.map((x) => `0${x.toString(8)}`).join('.'),
        b.map((x) => `0x${x.toString(16)}`).join('.'),
        `${b[0]}.${(n & 0xffffff) >>> 0}`,
        `${b[0]}.${b[1]}.${n & 0xffff}`,
      ];
    };
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 7 }), (n, i) => {
        expect(problem(`https://${spellings(n)[i]}/release`)).toBe('must name its host, not an IP address.');
      }),
      { numRuns: 500 },
    );
  });

  it('never accepts an endpoint whose parsed host is an IP literal, localhost or a bare name', () => {
    fc.assert(
      fc.property(fc.webUrl({ withFragments: true, withQueryParameters: true }), (raw) => {
        const r = readEndpoint(raw);
        if (!r.ok) return;
        const url = new URL(r.endpoint.url);
        expect(url.protocol).toBe('https:');
        expect(url.hostname).toContain('.');
        expect(url.hostname).not.toMatch(/^\[|^\d+\.\d+\.\d+\.\d+$/);
        expect(url.hostname.split('.')).not.toContain('localhost');
        expect(url.username + url.password + url.hash).toBe('');
        expect(readEndpoint(r.endpoint.url)).toEqual(r); // normalised form is stable
      }),
      { numRuns: 500 },
    );
  });
});

import { describe, expect, it } from '@jest/globals';
import { AddressPolicy } from './address-policy.js';
import { parseDnsServers } from './resolver.js';

const policy = new AddressPolicy();

describe('address policy: public addresses only', () => {
  it.each([
    // IPv4 special-purpose ranges
    ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'], ['10.0.0.1', 'private'], ['10.255.255.255', 'private'],
    ['100.64.0.1', 'carrierGradeNat'], ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'], ['169.254.169.254', 'linkLocal'],
    ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.0.0.8', 'reserved'], ['192.0.2.1', 'reserved'],
    ['192.88.99.1', 'reserved'], ['192.168.1.1', 'private'], ['198.18.0.1', 'reserved'], ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'], ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'], ['192.31.196.1', 'as112'], ['192.52.193.1', 'amt'],
    // IPv6 special-purpose ranges
    ['::', 'unspecified'], ['::1', 'loopback'], ['fe80::1', 'linkLocal'], ['fc00::1', 'uniqueLocal'], ['fd12:3456::1', 'uniqueLocal'],
    ['fec0::1', 'deprecatedSiteLocal'], ['ff02::1', 'multicast'], ['100::1', 'discard'], ['2001:db8::1', 'reserved'],
    ['2001:2::1', 'benchmarking'], ['3fff::1', 'reserved'], ['5f00::1', 'segmentRouting'],
    // IPv4 embedded in IPv6, whatever the IPv4 inside (public ones too)
    ['::ffff:127.0.0.1', 'ipv4Mapped'], ['::ffff:7f00:1', 'ipv4Mapped'], ['::ffff:8.8.8.8', 'ipv4Mapped'], ['::ffff:0:a00:1', 'rfc6145'],
    ['64:ff9b::7f00:1', 'rfc6052'], ['64:ff9b::10.0.0.1', 'rfc6052'], ['64:ff9b::8.8.8.8', 'rfc6052'], ['64:ff9b:1::a00:1', 'rfc6052'],
    ['2002:7f00:1::', '6to4'], ['2002:a00:1::1', '6to4'], ['2002:808:808::1', '6to4'],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'teredo'], ['2001::1', 'teredo'],
    // outside global unicast 2000::/3: IPv4-compatible and unassigned space
    ['::7f00:1', 'not global unicast'], ['::808:808', 'not global unicast'],
    // ipaddr.js reads the dotted IPv4-compatible spelling as mapped; refused either way
    ['::127.0.0.1', 'ipv4Mapped'], ['::8.8.8.8', 'ipv4Mapped'], ['4000::1', 'not global unicast'], ['e000::1', 'not global unicast'],
  ])('refuses %s (%s)', (address, range) => {
    expect(policy.judge(address)).toEqual({ allowed: false, range });
  });

  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '151.101.1.69', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888'])('allows the public address %s', (address) => {
    expect(policy.judge(address)).toEqual({ allowed: true, via: 'public' });
  });

  it('refuses what is not an address at all', () => {
    expect(policy.judge('example.com')).toEqual({ allowed: false, range: 'not an IP address' });
    expect(policy.judge('')).toEqual({ allowed: false, range: 'not an IP address' });
  });

  it('allows the ranges of SVC_EGRESS_ALLOW_CIDRS, and only those, beside public addresses', () => {
    const p = new AddressPolicy(['127.0.0.0/8', 'fd00::/8']);
    expect(p.judge('127.3.4.5')).toEqual({ allowed: true, via: 'allow-list' });
    expect(p.judge('fd00::7')).toEqual({ allowed: true, via: 'allow-list' });
    expect(p.judge('::1')).toEqual({ allowed: false, range: 'loopback' });
    expect(p.judge('::ffff:127.0.0.1')).toEqual({ allowed: false, range: 'ipv4Mapped' });
    expect(p.judge('10.0.0.1')).toEqual({ allowed: false, range: 'private' });
    expect(p.judge('8.8.8.8')).toEqual({ allowed: true, via: 'public' });
    expect(p.allowList).toEqual(['127.0.0.0/8', 'fd00::/8']);
    expect(() => new AddressPolicy(['127.0.0.0/33'])).toThrow("'127.0.0.0/33' is not an address range");
  });
});

describe('SVC_DNS_SERVERS', () => {
  it('reads ip[:port] lists', () => {
    expect(parseDnsServers('127.0.0.1:5353, 10.0.0.2,[::1]:53,::1')).toEqual(['127.0.0.1:5353', '10.0.0.2:53', '[::1]:53', '[::1]:53']);
  });
  it.each(['dns.example.com', '127.0.0.1:0', '127.0.0.1:70000', '[::1', '1.2.3'])('refuses %s', (v) => {
    expect(() => parseDnsServers(v)).toThrow('is not a resolver address');
  });
});

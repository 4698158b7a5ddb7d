import ipaddr from 'ipaddr.js';

/**
 * Which addresses an endpoint may be reached at (spec 2.5: public addresses only). Classification
 * is ipaddr.js's table of special-purpose ranges (RFC 6890 and successors), plus one rule of our
 * own for IPv6: only global unicast space (2000::/3) is public. That rule also refuses the
 * IPv4-compatible (::/96) and every other form that is not in ipaddr.js's table. Every form that
 * carries an IPv4 address inside IPv6 (mapped ::ffff:0:0/96, translated ::ffff:0:0:0/96, NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) is refused whatever the
 * IPv4 address inside, since where it leads depends on gateways we do not control.
 */
type Address = ipaddr.IPv4 | ipaddr.IPv6;

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];

export type AddressVerdict = { allowed: true; via: 'public' | 'allow-list' } | { allowed: false; range: string };

export class AddressPolicy {
  private readonly allowed: [Address, number][];

  /** `allowCidrs`: ranges allowed although not public (SVC_EGRESS_ALLOW_CIDRS). */
  constructor(allowCidrs: readonly string[] = []) {
    this.allowed = allowCidrs.map(parseCidr);
  }

  get allowList(): readonly string[] {
    return this.allowed.map(([a, bits]) => `${a.toString()}/${bits}`);
  }

  judge(address: string): AddressVerdict {
    if (!ipaddr.isValid(address)) return { allowed: false, range: 'not an IP address' };
    const parsed = ipaddr.parse(address);
    if (this.allowed.some(([net, bits]) => net.kind() === parsed.kind() && parsed.match(net, bits))) return { allowed: true, via: 'allow-list' };
    const range = classify(parsed);
    return range === 'public' ? { allowed: true, via: 'public' } : { allowed: false, range };
  }
}

/** `public`, or the name of the special-purpose range the address is in. */
export function classify(address: Address): string {
  const range = address.range();
  if (range !== 'unicast') return range;
  if (address.kind() === 'ipv6' && !address.match(GLOBAL_UNICAST_V6)) return 'not global unicast';
  return 'public';
}

/** `a.b.c.d/n` or `x::/n`; throws a plain Error naming the bad entry. */
export function parseCidr(cidr: string): [Address, number] {
  try {
    return ipaddr.parseCIDR(cidr.trim());
  } catch {
    throw new Error(`'${cidr}' is not an address range such as 127.0.0.0/8 or fd00::/8`);
  }
}

import { promises as dns } from 'node:dns';
import net from 'node:net';

/**
 * Resolves an endpoint's host name once per call. With `servers` (SVC_DNS_SERVERS) it asks those
 * resolvers for A and AAAA records; without, the system resolver (getaddrinfo, so /etc/hosts
 * applies). Either way the caller gets every address, and checks each one before connecting.
 */
export interface HostResolver {
  resolve(host: string, signal: AbortSignal): Promise<string[]>;
}

/** `ip[:port],…` (IPv6 with a port in brackets: `[::1]:53`); throws a plain Error naming the bad entry. */
export function parseDnsServers(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((entry) => {
      const m = /^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$/.exec(entry) ?? /^([0-9.]+)(?::(\d{1,5}))?$/.exec(entry) ?? /^([0-9a-fA-F:]+)()$/.exec(entry);
      const port = m?.[2] ? Number(m[2]) : 53;
      if (!m || net.isIP(m[1]!) === 0 || port < 1 || port > 65535) throw new Error(`'${entry}' is not a resolver address such as 10.0.0.2 or 127.0.0.1:5353`);
      return net.isIPv6(m[1]!) ? `[${m[1]}]:${port}` : `${m[1]}:${port}`;
    });
}

const isNoData = (e: unknown): boolean => ['ENODATA', 'ENOTFOUND', 'NOTFOUND'].includes((e as { code?: string }).code ?? '');

/** Idle resolvers kept for later calls (see DnsResolver). */
const MAX_IDLE_RESOLVERS = 32;

export class DnsResolver implements HostResolver {
  /**
   * Resolvers (c-ares channels) between calls: making one costs more than the two questions it
   * asks. Each serves one call at a time, so that cancelling one call cannot cancel another's
   * queries; one whose call failed or was cancelled is not kept. Nothing is cached: every call
   * asks the servers again.
   */
  private readonly idle: dns.Resolver[] = [];

  constructor(private readonly servers?: readonly string[]) {}

  async resolve(host: string, signal: AbortSignal): Promise<string[]> {
    if (!this.servers || this.servers.length === 0) {
      const found = await abortable(dns.lookup(host, { all: true, verbatim: true }), signal, () => undefined);
      return found.map((a) => a.address);
    }
    const resolver = this.idle.pop() ?? this.newResolver(this.servers);
    const query = async (rrtype: 'A' | 'AAAA'): Promise<string[]> => {
      try {
        return rrtype === 'A' ? await resolver.resolve4(host) : await resolver.resolve6(host);
      } catch (e) {
        if (isNoData(e)) return [];
        throw e;
      }
    };
    const [v4, v6] = await abortable(Promise.all([query('A'), query('AAAA')]), signal, () => resolver.cancel());
    // Both questions answered: nothing of this call is left on the resolver.
    if (this.idle.length < MAX_IDLE_RESOLVERS) this.idle.push(resolver);
    if (v4.length + v6.length === 0) throw Object.assign(new Error(`${host} has no A or AAAA record`), { code: 'ENOTFOUND' });
    return [...v4, ...v6];
  }

  private newResolver(servers: readonly string[]): dns.Resolver {
    const resolver = new dns.Resolver({ timeout: 2000, tries: 2 });
    resolver.setServers([...servers]);
    return resolver;
  }
}

function abortable<T>(work: Promise<T>, signal: AbortSignal, cancel: () => void): Promise<T> {
  if (signal.aborted) {
    cancel();
    return Promise.reject(signal.reason as Error);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      cancel();
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}

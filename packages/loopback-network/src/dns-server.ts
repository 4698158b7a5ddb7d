import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';

/** What a name resolves to. A name with neither is answered with no records (not NXDOMAIN). */
export interface DnsAnswers {
  A?: string[];
  AAAA?: string[];
}

const NXDOMAIN = 3;

/**
 * A DNS server on a loopback UDP port whose answers the caller sets and changes at any time
 * (TTL 0, so nothing is cached): the resolver of the tests and of `ets demo`. It answers A and
 * AAAA questions for the names it was given, NXDOMAIN for others, and counts the questions per
 * name so a test can see how often the service asked.
 */
export class LoopbackDns {
  readonly #zone = new Map<string, DnsAnswers>();
  readonly #asked = new Map<string, number>();

  private constructor(
    private readonly socket: dgram.Socket,
    /** `ip:port`, as SVC_DNS_SERVERS takes it. */
    readonly address: string,
  ) {
    socket.on('message', (msg, from) => this.answer(msg, from));
  }

  static async start(options: { host?: string; port?: number } = {}): Promise<LoopbackDns> {
    const host = options.host ?? '127.0.0.1';
    const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(options.port ?? 0, host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    socket.on('error', () => undefined); // a malformed datagram must not stop the server
    const { port } = socket.address();
    return new LoopbackDns(socket, net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`);
  }

  /** Sets (replaces) what `name` resolves to. */
  set(name: string, answers: DnsAnswers): this {
    this.#zone.set(name.toLowerCase(), { A: [...(answers.A ?? [])], AAAA: [...(answers.AAAA ?? [])] });
    return this;
  }

  delete(name: string): this {
    this.#zone.delete(name.toLowerCase());
    return this;
  }

  /** How many questions (A and AAAA counted apart) were asked about `name`. */
  asked(name: string): number {
    return this.#asked.get(name.toLowerCase()) ?? 0;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  private answer(msg: Buffer, from: dgram.RemoteInfo): void {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const questions = query.questions ?? [];
    const answers: dnsPacket.Answer[] = [];
    let flags = dnsPacket.AUTHORITATIVE_ANSWER | ((query.flags ?? 0) & dnsPacket.RECURSION_DESIRED);
    for (const q of questions) {
      const name = q.name.toLowerCase();
      this.#asked.set(name, (this.#asked.get(name) ?? 0) + 1);
      const entry = this.#zone.get(name);
      if (!entry) {
        flags |= NXDOMAIN;
        continue;
      }
      if (q.type === 'A') for (const data of entry.A ?? []) answers.push({ type: 'A', name: q.name, ttl: 0, class: 'IN', data });
      if (q.type === 'AAAA') for (const data of entry.AAAA ?? []) answers.push({ type: 'AAAA', name: q.name, ttl: 0, class: 'IN', data });
    }
    const reply = dnsPacket.encode({ type: 'response', id: query.id, flags, questions, answers });
    this.socket.send(reply, from.port, from.address);
  }
}

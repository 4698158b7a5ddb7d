// @peculiar/x509 resolves its ASN.1 codecs through tsyringe, which needs the Reflect metadata polyfill first.
import 'reflect-metadata';
import { randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

// @peculiar/x509 is typed against the DOM's WebCrypto; Node's is the same API under other names.
type DomCrypto = Parameters<typeof x509.cryptoProvider.set>[0];
type DomKeyPair = x509.X509CertificateCreateSelfSignedParams['keys'];
type DomKey = x509.X509CertificateCreateParams['publicKey'];
x509.cryptoProvider.set(webcrypto as unknown as DomCrypto);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

/** A server certificate and its private key, as `https.createServer` takes them (PEM). */
export interface ServerCredentials {
  cert: string;
  key: string;
}

const serial = (): string => {
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f; // a positive INTEGER
  return bytes.toString('hex');
};

const exportKeyPem = async (key: webcrypto.CryptoKey): Promise<string> =>
  x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');

/**
 * A certificate authority made for one test run or one demo: its certificate is what
 * NODE_EXTRA_CA_CERTS points the service at, and it issues server certificates for host names
 * (ECDSA P-256, valid for a few days).
 */
export class TestCertificateAuthority {
  private constructor(
    private readonly keys: webcrypto.CryptoKeyPair,
    private readonly certificate: x509.X509Certificate,
  ) {}

  static async create(commonName = 'ets test CA'): Promise<TestCertificateAuthority> {
    const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const now = Date.now();
    const certificate = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `CN=${commonName}`,
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(now + 30 * DAY_MS),
      keys: keys as unknown as DomKeyPair,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey as unknown as DomKey),
      ],
    });
    return new TestCertificateAuthority(keys, certificate);
  }

  /** The CA certificate (PEM): the file NODE_EXTRA_CA_CERTS names. */
  get certificatePem(): string {
    return this.certificate.toString('pem');
  }

  /** A server certificate for `hostNames` (the first is the subject), signed by this CA. */
  async issue(hostNames: string[], options: { validDays?: number } = {}): Promise<ServerCredentials> {
    const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const now = Date.now();
    const validDays = options.validDays ?? 7;
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${hostNames[0]}`,
      issuer: this.certificate.subject,
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(now + validDays * DAY_MS),
      publicKey: keys.publicKey as unknown as DomKey,
      signingKey: this.keys.privateKey as unknown as DomKey,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension(hostNames.map((value) => ({ type: 'dns' as const, value }))),
        await x509.AuthorityKeyIdentifierExtension.create(this.certificate),
      ],
    });
    return { cert: cert.toString('pem'), key: await exportKeyPem(keys.privateKey) };
  }
}

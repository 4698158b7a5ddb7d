/**
 * The reference business signal source (CONTRACT "Business signal sources"): a small HTTPS server
 * that answers the service's questions from a JSON file and signs each answer with its own Ed25519
 * key, so that a team can try the whole flow locally and read the protocol in working code.
 * `ets source serve` runs it.
 *
 * The protocol, for teams writing their own source:
 * - The service asks `POST <endpoint>` with `{"fact", "subject", "businessTransactionId", "nonce"}`.
 * - The source answers `200 {"fact", "subject", "value", "validUntil", "nonce", "keyId"?, "proof"?}`:
 *   `fact`, `subject` and `nonce` echoed exactly, `validUntil` an RFC 3339 date-time after which the
 *   value must not be relied on, `proof` the base64 Ed25519 signature over the RFC 8785 canonical
 *   JSON of `{fact, subject, value, validUntil, nonce}` with the key registered for the source.
 * - Anything else (another status, a late answer, a wrong echo, a value of another type, a passed
 *   `validUntil`, a proof that does not verify) refuses the request as SOURCE_UNAVAILABLE.
 */
import { createPrivateKey, createPublicKey, sign as nodeSign, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { canonicalize, sourceKeyIdOf } from '@ets/adapters-crypto';

/** How long an answer holds when the facts file does not say (seconds). */
export const DEFAULT_VALID_FOR_SECONDS = 300;
const MAX_QUESTION_BYTES = 16 * 1024;

/**
 * The facts file: `{ "<fact>": { "<subject>": <value> } }`, or with its own validity
 * `{ "<fact>": { "<subject>": { "value": <value>, "validForSeconds": 60 } } }`. It is read again on
 * every question, so an edit takes effect at once.
 */
export type FactsFile = Record<string, Record<string, unknown>>;

export interface SourceAnswer {
  status: number;
  body: Record<string, unknown>;
}

export interface SourceSigningKey {
  privateKey: KeyObject;
  /** `ed25519:<base64url of the public key>`: the `sourceKeyId` the service records. */
  keyId: string;
  publicKeyPem: string;
}

/** Reads an Ed25519 private key (PKCS#8 PEM). */
export function readSigningKey(pem: string): SourceSigningKey {
  const privateKey = createPrivateKey({ key: pem, format: 'pem' });
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new TypeError('the signing key must be an Ed25519 private key (openssl genpkey -algorithm ed25519)');
  const publicKeyPem = createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }) as string;
  return { privateKey, keyId: sourceKeyIdOf(publicKeyPem)!, publicKeyPem };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The answer to one question: what the protocol says, from `facts`, signed with `key` when there is one. */
export function answerQuestion(question: unknown, facts: FactsFile, key: SourceSigningKey | undefined, now: Date, validForSeconds = DEFAULT_VALID_FOR_SECONDS): SourceAnswer {
  const refuse = (status: number, error: string): SourceAnswer => ({ status, body: { error } });
  if (!isObject(question)) return refuse(400, 'The question must be {"fact", "subject", "businessTransactionId", "nonce"}.');
  const { fact, subject, nonce, businessTransactionId } = question;
  if (typeof fact !== 'string' || fact === '') return refuse(400, 'fact must be a non-empty string.');
  if (typeof subject !== 'string' && typeof subject !== 'number') return refuse(400, 'subject must be a string or a number.');
  if (typeof nonce !== 'string' || nonce === '' || nonce.length > 512) return refuse(400, 'nonce must be a non-empty string.');
  if (typeof businessTransactionId !== 'string') return refuse(400, 'businessTransactionId must be a string.');
  const bySubject = Object.prototype.hasOwnProperty.call(facts, fact) ? facts[fact] : undefined;
  const entry = isObject(bySubject) && Object.prototype.hasOwnProperty.call(bySubject, String(subject)) ? bySubject[String(subject)] : undefined;
  if (entry === undefined) return refuse(404, `No value of '${fact}' for '${String(subject)}'.`);
  const withValidity = isObject(entry) && Object.prototype.hasOwnProperty.call(entry, 'value');
  const value = withValidity ? entry.value : entry;
  const seconds = withValidity && typeof entry.validForSeconds === 'number' ? entry.validForSeconds : validForSeconds;
  const validUntil = new Date(now.getTime() + seconds * 1000).toISOString();
  const statement = { fact, subject, value, validUntil, nonce };
  if (!key) return { status: 200, body: statement };
  const proof = nodeSign(null, Buffer.from(canonicalize(statement), 'utf8'), key.privateKey).toString('base64');
  return { status: 200, body: { ...statement, keyId: key.keyId, proof } };
}

export interface ReferenceSourceOptions {
  /** The facts file (read on every question). */
  factsFile: string;
  key?: SourceSigningKey;
  /** TLS certificate and key (PEM) for the source's host name: the service speaks https only. */
  tls: { cert: string; key: string };
  host?: string;
  port?: number;
  validForSeconds?: number;
  /** Called for every question answered (logging). */
  onAnswer?(question: unknown, answer: SourceAnswer): void;
}

export interface RunningReferenceSource {
  address: string;
  port: number;
  close(): Promise<void>;
}

/** Starts the reference source. */
export async function startReferenceSource(options: ReferenceSourceOptions): Promise<RunningReferenceSource> {
  const server = https.createServer({ cert: options.tls.cert, key: options.tls.key }, (req, res) => {
    const send = (a: SourceAnswer) => {
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    };
    if (req.method !== 'POST') return send({ status: 405, body: { error: 'Ask with POST.' } });
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_QUESTION_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      let answer: SourceAnswer;
      try {
        if (size > MAX_QUESTION_BYTES) throw new Error('too large');
        const question = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
        const facts = JSON.parse(readFileSync(options.factsFile, 'utf8')) as FactsFile;
        answer = answerQuestion(question, isObject(facts) ? facts : {}, options.key, new Date(), options.validForSeconds);
        options.onAnswer?.(question, answer);
      } catch (e) {
        answer = { status: 400, body: { error: `The question could not be read (${(e as Error).message}).` } };
      }
      send(answer);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8443, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    address,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

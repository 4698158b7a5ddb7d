/**
 * Asking business signal sources (CONTRACT "Business signal sources"): `POST <endpoint>` with
 * `{fact, subject, businessTransactionId, nonce}` through the egress port, every source of a
 * request in parallel under one deadline, and every answer checked before it is trusted: status
 * 200, the fact, subject and nonce echoed, a value of the declared type, a `validUntil` still
 * ahead, and for a source registered with a key a proof that verifies with it. The nonce is fresh
 * per question and accepted once. Which source is asked is the policy's, never the caller's.
 */
import type { Clock } from '../ports/clock.js';
import type { NonceGenerator, SingleUseLedger } from '../ports/single-use.js';
import type { Egress } from '../egress/ports.js';
import type { BusinessTransaction, TrustedSignal } from '../execution/records.js';
import type { ReleaseCondition } from '../execution/connectors.js';
import { hasSignalType, type SignalSourceBinding, type SignalType } from '../policy/index.js';
import { isPlainObject } from '../shared/guards.js';
import { valueAtPath } from '../shared/request-paths.js';
import { parseRfc3339 } from '../shared/rfc3339.js';
import type { SignalSourceStore, SourceProofVerifier } from './ports.js';

/** The scope of used source nonces in the single-use ledger. */
export const SOURCE_NONCE_SCOPE = 'source-nonce';

export interface SourceAskingDeps {
  egress: Pick<Egress, 'postJson'>;
  sources: Pick<SignalSourceStore, 'active'>;
  proofs: Pick<SourceProofVerifier, 'verify'>;
  clock: Clock;
  nonces: NonceGenerator;
  used: SingleUseLedger;
  timeoutMs: number;
}

/** A declared signal whose value a source owns. */
export interface SourcedFact {
  signal: string;
  binding: SignalSourceBinding;
  type: SignalType;
}

export type AskResult = { ok: true; signals: TrustedSignal[] } | { ok: false; reason: string };

/** The facts a policy sources, with their declared types. */
export function sourcedFacts(doc: { signalsSchema: Record<string, { type: SignalType }>; signalSources?: Record<string, SignalSourceBinding> }): SourcedFact[] {
  return Object.entries(doc.signalSources ?? {}).map(([signal, binding]) => ({ signal, binding, type: doc.signalsSchema[signal]!.type }));
}

/** What a release carries of the Trusted Signals: the facts as conditions (spec 4.3.7). */
export const conditionsOf = (signals: readonly TrustedSignal[]): ReleaseCondition[] =>
  signals.map((s) => ({ signal: s.signal, value: s.value, validUntil: s.validUntil, source: s.source }));

export class SignalSourceClient {
  constructor(private readonly d: SourceAskingDeps) {}

  /** Asks every fact's source at once; the first failure (in policy order) is the reason. */
  async askAll(facts: readonly SourcedFact[], tx: BusinessTransaction): Promise<AskResult> {
    if (facts.length === 0) return { ok: true, signals: [] };
    const deadline = this.d.clock.now().getTime() + this.d.timeoutMs;
    const answers = await Promise.all(facts.map((f) => this.ask(f, tx, deadline).catch((e: unknown) => `${f.binding.source}: ${e instanceof Error ? e.message : String(e)}`)));
    const failed = answers.find((a): a is string => typeof a === 'string');
    return failed !== undefined ? { ok: false, reason: failed } : { ok: true, signals: answers as TrustedSignal[] };
  }

  private async ask(fact: SourcedFact, tx: BusinessTransaction, deadline: number): Promise<TrustedSignal | string> {
    const { source: name, fact: factName, subject: subjectPath } = fact.binding;
    const subject = valueAtPath(tx, subjectPath);
    if (typeof subject !== 'string' && typeof subject !== 'number') {
      return `the subject of '${fact.signal}' (${subjectPath}) is missing from the request, or is not a string or a number`;
    }
    const source = await this.d.sources.active(name);
    if (!source) return `source '${name}' is not registered`;
    const nonce = this.d.nonces.nonce();
    const timeoutMs = Math.max(1, deadline - this.d.clock.now().getTime());
    const answer = await this.d.egress.postJson({
      endpoint: source.endpoint,
      body: { fact: factName, subject, businessTransactionId: tx.businessTransactionId, nonce },
      timeoutMs,
    });
    if (answer.outcome !== 'answered') return `source '${name}' could not be asked: ${answer.message}`;
    if (answer.status !== 200) return `source '${name}' answered ${answer.status}`;
    const body = answer.body;
    if (!isPlainObject(body) || body.fact !== factName || body.subject !== subject) {
      return `source '${name}' answered outside the protocol (not the fact and subject it was asked for)`;
    }
    if (body.nonce !== nonce) return `source '${name}' did not echo the nonce of the question`;
    if (!hasSignalType(fact.type, body.value)) return `source '${name}' answered a value for ${factName} that is not a ${fact.type}`;
    const fetched = this.d.clock.now();
    const until = typeof body.validUntil === 'string' ? parseRfc3339(body.validUntil) : undefined;
    if (until === undefined) return `source '${name}' answered without a valid validUntil (an RFC 3339 date-time)`;
    if (until <= fetched.getTime()) return `the answer of source '${name}' for ${factName} held only until ${body.validUntil as string}`;
    let proof: string | null = null;
    if (source.keyId !== null) {
      const statement = { fact: factName, subject, value: body.value, validUntil: body.validUntil, nonce };
      if (typeof body.proof !== 'string' || !this.d.proofs.verify(source.keyId, statement, body.proof)) {
        return `the proof of source '${name}' does not verify with its registered key`;
      }
      proof = body.proof;
    }
    if (!(await this.d.used.consume(SOURCE_NONCE_SCOPE, nonce, fetched.toISOString()))) return `the nonce of source '${name}' was used before`;
    return {
      signal: fact.signal,
      source: name,
      fact: factName,
      subject,
      value: body.value,
      validUntil: body.validUntil as string,
      nonce,
      sourceKeyId: source.keyId,
      sourceProof: proof,
      sourceProofVerified: proof !== null,
      fetchedAt: fetched.toISOString(),
    };
  }
}

import { createHash, generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import request from 'supertest';
import { canonicalize, signStepUpPayload, sourceKeyIdOf } from '@ets/adapters-crypto';
import { bearer, makeKey, type TestKey } from './keys.js';
import type { TestHandler } from './network.js';
import { businessTransaction } from './transactions.js';

/** An Ed25519 key pair of a business signal source (or an approver). */
export interface Ed25519TestKey {
  privateKeyPem: string;
  publicKeyPem: string;
  /** `ed25519:<base64url raw key>`, as the service names a source key. */
  keyId: string;
}

export function ed25519Key(): Ed25519TestKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
  return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, publicKeyPem, keyId: sourceKeyIdOf(publicKeyPem)! };
}

/** The proof of a source answer: base64 Ed25519 over C({fact, subject, value, validUntil, nonce}). */
export function sourceProof(key: Ed25519TestKey, a: { fact: unknown; subject: unknown; value: unknown; validUntil: unknown; nonce: unknown }): string {
  const statement = { fact: a.fact, subject: a.subject, value: a.value, validUntil: a.validUntil, nonce: a.nonce };
  return sign(null, Buffer.from(canonicalize(statement), 'utf8'), key.privateKeyPem).toString('base64');
}

export interface SourceQuestion {
  fact: string;
  subject: string | number;
  businessTransactionId: string;
  nonce: string;
}

/**
 * A scripted source for an HTTPS test server: `answer` says what to answer to each question (or
 * `undefined` to never answer); by default an honest signed answer valid 5 minutes.
 */
export function scriptedSource(
  key: Ed25519TestKey | undefined,
  answer: (q: SourceQuestion, honest: (value?: unknown, validUntil?: string) => Record<string, unknown>) => { status?: number; body?: unknown; delayMs?: number } | undefined,
): TestHandler & { questions: SourceQuestion[] } {
  const questions: SourceQuestion[] = [];
  const handler = ((_req, res, body) => {
    const q = JSON.parse(body) as SourceQuestion;
    questions.push(q);
    const honest = (value: unknown = 120, validUntil = new Date(Date.now() + 300_000).toISOString()) => {
      const statement = { fact: q.fact, subject: q.subject, value, validUntil, nonce: q.nonce };
      return key ? { ...statement, keyId: key.keyId, proof: sourceProof(key, statement) } : statement;
    };
    const a = answer(q, honest);
    if (!a) return; // never answers: the socket stays open until the test network closes it
    const send = () => {
      if (res.destroyed) return;
      res.writeHead(a.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body ?? honest()));
    };
    if (a.delayMs) setTimeout(send, a.delayMs);
    else send();
  }) as TestHandler & { questions: SourceQuestion[] };
  handler.questions = questions;
  return handler;
}

/** A step-up envelope signed with the key's own step-up private key (what `ets step-up sign` prints). */
export function envelope(
  checker: TestKey,
  changeId: string,
  action: 'approve' | 'reject',
  over: Record<string, unknown> = {},
  signingKeyPem: string = checker.stepUpPrivateKeyPem!,
): { payload: Record<string, unknown>; signature: string } {
  const payload: Record<string, unknown> = {
    pendingPolicyChangeId: changeId,
    action,
    expiresAt: new Date(Date.now() + 300_000).toISOString(),
    nonce: randomBytes(32).toString('base64url'),
    callerId: checker.record.callerId,
    ...(action === 'reject' ? { reason: 'Not like this' } : {}),
    ...over,
  };
  for (const k of Object.keys(payload)) if (payload[k] === undefined) delete payload[k];
  return { payload, signature: signStepUpPayload(signingKeyPem, payload) };
}

/** The people of the business validation tests: alice proposes, bob approves, agent-7 acts. */
export function businessCast(): { alice: TestKey; bob: TestKey; agent: TestKey } {
  return {
    alice: makeKey('alice', { holder: 'USER', capabilities: ['*'], stepUp: true }),
    bob: makeKey('bob', { holder: 'USER', stepUp: true }),
    agent: makeKey('agent-7', { holder: 'SERVICE', capabilities: ['*'], tenants: ['t1'] }),
  };
}

/**
 * A policy that holds a transfer above 1000 for a human (`requires_override`), its approval scoped
 * to the amount, and approves the rest: the held transactions' tests use it under their own names.
 */
export const holdingPolicy = (name: string) => ({
  name,
  policyVersion: '1.0.0',
  signalsSchema: { amount: { type: 'number' } },
  approvalScope: { value: 'intent.parameters.amount' },
  rules: [
    { id: 'large', when: 'signals.amount > 1000', action: 'approve', requires_override: true, reason: 'Large transfer needs a second look' },
    { id: 'ok', when: 'true', action: 'approve', reason: 'Within limits' },
  ],
});

/** `agent` executes a transfer of `amount` under `policyName` 1.0.0 (a holdingPolicy): held (202); its id. */
export async function holdTransfer(baseUrl: string, agent: TestKey, policyName: string, amount: number): Promise<string> {
  const tx = businessTransaction({ intent: { action: 'sandbox:echo', parameters: { amount } }, policy: { name: policyName, version: '1.0.0' }, signals: { amount } });
  const res = await request(baseUrl).post('/execute').set('authorization', bearer(agent)).send(tx);
  if (res.status !== 202) throw new Error(`a transfer of ${amount} answered ${res.status}, not 202 (held): ${JSON.stringify(res.body)}`);
  return tx.businessTransactionId as string;
}

/** Proposes a change in `area` as `maker` and approves it as `checker`; returns the approved change. */
export async function governed(baseUrl: string, area: string, maker: TestKey, checker: TestKey, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const proposed = await request(baseUrl).post(`${area}/changes`).set('authorization', bearer(maker)).send(body);
  if (proposed.status !== 201) throw new Error(`proposal ${area} answered ${proposed.status}: ${JSON.stringify(proposed.body)}`);
  const approved = await request(baseUrl)
    .post(`${area}/changes/${proposed.body.id}/approve`)
    .set('authorization', bearer(checker))
    .send(envelope(checker, proposed.body.id as string, 'approve'));
  if (approved.status !== 200) throw new Error(`approval ${area} answered ${approved.status}: ${JSON.stringify(approved.body)}`);
  return approved.body as Record<string, unknown>;
}

/** A signed approval payload (CONTRACT "Signed approvals…"), signed with `signerPem`. */
export function signedApproval(signerPem: string, payload: Record<string, unknown>): { payload: Record<string, unknown>; signature: string } {
  return { payload, signature: signStepUpPayload(signerPem, payload) };
}

/**
 * A signed approval of the held transaction `tx` by `approver` (its step-up key), for a policy that
 * declares no `approvalScope` (the scope is the transaction itself).
 */
export function heldApproval(approver: TestKey, tx: Record<string, unknown>): { payload: Record<string, unknown>; signature: string } {
  return signedApproval(approver.stepUpPrivateKeyPem!, {
    approvalId: randomUUID(),
    approverId: approver.record.callerId,
    businessTransactionId: tx.businessTransactionId,
    action: (tx.intent as { action: string }).action,
    scope: { field: 'resourceId', resourceId: tx.businessTransactionId },
    signalsHash: createHash('sha256').update(canonicalize(tx.signals ?? {})).digest('hex'),
    expiresAt: new Date(Date.now() + 300_000).toISOString(),
    nonce: randomBytes(32).toString('base64url'),
  });
}

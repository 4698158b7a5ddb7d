/**
 * Fakes for unit tests of the execution pipeline (no crypto, no I/O): every port of ExecutionDeps
 * as a small object typed against it (`satisfies`), over the in-memory store and a clock that
 * moves only when a test moves it. Each fake writes down what it was asked, so a test can assert
 * what happened and in which order. Not exported by the package.
 */
import { fakeHasher, fakeKeys } from '../attestation/testing.js';
import type { AuthorityGrant } from '../authority/grants.js';
import type { AskResult, SourcedFact } from '../business-validation/asking.js';
import type { Caller } from '../identity/caller.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Signer } from '../ports/crypto.js';
import { compilePolicy, type PolicyDocument, type RecordedDecision } from '../policy/index.js';
import { contractSamplePolicy } from '../policy/sample.fixture.js';
import type { Connector, ConnectorRegistry, ReleaseRequest } from './connectors.js';
import type { ExecutionDeps, ExecutionOutcome, PolicyCatalog, PublishedPolicy } from './context.js';
import { ExecutionService } from './execution-service.js';
import { InMemoryExecutionStore } from './in-memory-store.js';
import type { BusinessTransaction, TrustedSignal } from './records.js';

export const T0 = Date.UTC(2025, 0, 1);
export const iso = (ms: number): string => new Date(ms).toISOString();

/** Time stands still until a test moves it. */
export class FakeClock implements Clock {
  constructor(public ms = T0) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export const POLICY = 'payments-transfer';

/**
 * The CONTRACT sample policy (sanctioned countries refused, above 10000 held for an override, the
 * rest approved) as published version `version`, with `change` applied.
 */
export function publishedPolicy(version: string, change: Partial<PolicyDocument> = {}): PublishedPolicy {
  const document: PolicyDocument = { ...contractSamplePolicy(), policyVersion: version, ...change };
  return { document, contentHash: fakeHasher.contentHash(document), compiled: compilePolicy(document) };
}

/** The policy versions every harness publishes: plain, with a grant required, with a sourced amount, with a bound amount. */
export const VERSIONS = {
  plain: '1.0.0',
  grant: '2.0.0',
  sourced: '3.0.0',
  bound: '4.0.0',
  grantAndSourced: '5.0.0',
} as const;

const AMOUNT_FROM_ERP = { amount: { source: 'erp', fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' } };

/** A caller that may request payments:transfer for itself in tenant t-1. */
export const caller: Caller = { callerId: 'agent-7', allowedCapabilities: ['payments:transfer'], allowedPrincipalIds: [], allowedTenantIds: ['t-1'] };

let seq = 0;
/** A Business Transaction of `caller` for the plain policy, with a fresh id; `change` replaces whole objects. */
export function txOf(change: Partial<BusinessTransaction> = {}): BusinessTransaction {
  seq++;
  return {
    businessTransactionId: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`,
    metadata: { tenantId: 't-1' },
    authority: { principalId: 'agent-7', authorityId: 'auth-1' },
    authorization: { authorityId: 'auth-1' },
    intent: { action: 'payments:transfer', parameters: { amount: 100, invoiceId: 'inv-1' } },
    policy: { name: POLICY, version: VERSIONS.plain },
    signals: { amount: 100, country: 'DE' },
    ...change,
  };
}

/** A grant of `caller` for payments:transfer. */
export const grantOf = (change: Partial<AuthorityGrant> = {}): AuthorityGrant => ({
  grantId: 'grant-1',
  grantee: caller.callerId,
  action: 'payments:transfer',
  limits: [],
  expiresAt: iso(T0 + 86_400_000),
  proposer: 'alice',
  approvedBy: 'bob',
  grantedAt: iso(T0 - 86_400_000),
  ...change,
});

/** A source's answer to a fact, trusted by TLS alone. */
export const trustedSignal = (fact: SourcedFact, value: unknown, validUntil: string, fetchedAt: string): TrustedSignal => ({
  signal: fact.signal,
  source: fact.binding.source,
  fact: fact.binding.fact,
  subject: 'inv-1',
  value,
  validUntil,
  nonce: `nonce-${fact.signal}`,
  sourceKeyId: null,
  sourceProof: null,
  sourceProofVerified: false,
  fetchedAt,
});

/** What the fakes were asked, in order. */
export interface Calls {
  policies: string[];
  connectors: string[];
  sources: { facts: SourcedFact[]; tx: BusinessTransaction }[];
  grants: string[];
  approvals: unknown[];
  released: ReleaseRequest[];
}

/** The pipeline's deps over fakes; `behave` is how each fake answers, changeable by a test at any time. */
export function harness(options: { store?: InMemoryExecutionStore } = {}) {
  const clock = new FakeClock();
  const store = options.store ?? new InMemoryExecutionStore({ hasher: fakeHasher });
  const keys = fakeKeys();
  const calls: Calls = { policies: [], connectors: [], sources: [], grants: [], approvals: [], released: [] };
  const behave = {
    /** The connector's answer. */
    release: async (_request: ReleaseRequest): Promise<{ result: unknown }> => ({ result: { transferId: 'tr-1' } }),
    /** The sources' answer: each fact the amount 100, valid for a minute from now. */
    ask: async (facts: SourcedFact[]): Promise<AskResult> => ({
      ok: true,
      signals: facts.map((f) => trustedSignal(f, 100, iso(clock.ms + 60_000), iso(clock.ms))),
    }),
    grants: [] as AuthorityGrant[],
    /** The approvals' answer: every approval is accepted. */
    accept: async (raw: unknown): Promise<unknown> => raw,
    /** When false, the chain signature cannot be made: a Trust Record with an execution cannot be built. */
    chainSigning: true,
  };

  const signer = {
    sign: (record) => keys.signer.sign(record),
    signText: async (text, only) => {
      if (!behave.chainSigning) throw new Error('the signing key is unavailable');
      return keys.signer.signText(text, only);
    },
  } satisfies Signer;
  const connector = {
    namespace: 'payments',
    release: async (request) => {
      calls.released.push(request);
      return behave.release(request);
    },
  } satisfies Connector;
  const policies = new Map(
    [
      publishedPolicy(VERSIONS.plain),
      publishedPolicy(VERSIONS.grant, { requireAuthorityGrant: true }),
      publishedPolicy(VERSIONS.sourced, { signalSources: AMOUNT_FROM_ERP }),
      publishedPolicy(VERSIONS.bound, { boundSignals: { amount: 'intent.parameters.amount' } }),
      publishedPolicy(VERSIONS.grantAndSourced, { requireAuthorityGrant: true, signalSources: AMOUNT_FROM_ERP }),
    ].map((p) => [p.document.policyVersion, p]),
  );
  let ids = 0;

  const deps: ExecutionDeps = {
    store,
    signer,
    hasher: fakeHasher,
    clock,
    ids: { uuid: () => `exec-${++ids}` } satisfies IdGenerator,
    policies: {
      find: async (name, version) => {
        calls.policies.push(`${name}@${version}`);
        return name === POLICY ? policies.get(version) : undefined;
      },
    } satisfies PolicyCatalog,
    connectors: {
      find: async (action) => {
        calls.connectors.push(action);
        return action.startsWith('payments:') ? connector : undefined;
      },
    } satisfies ConnectorRegistry,
    sources: {
      askAll: async (facts, tx) => {
        calls.sources.push({ facts, tx });
        return behave.ask(facts);
      },
    } satisfies ExecutionDeps['sources'],
    grants: {
      forGrantee: async (grantee, action) => {
        calls.grants.push(`forGrantee ${grantee} ${action}`);
        return behave.grants.filter((g) => g.grantee === grantee && g.action === action && g.revokedAt === undefined).sort((a, b) => (a.expiresAt < b.expiresAt ? 1 : -1));
      },
      get: async (grantId) => {
        calls.grants.push(`get ${grantId}`);
        return behave.grants.find((g) => g.grantId === grantId);
      },
    } satisfies ExecutionDeps['grants'],
    approvals: {
      accept: async (raw) => {
        calls.approvals.push(raw);
        return behave.accept(raw);
      },
    } satisfies ExecutionDeps['approvals'],
    holds: { ttlSeconds: 86_400, notifier: { noticesOf: (item) => [{ deliveryId: `notice-${item.id}`, messageId: `msg-${item.id}`, endpoint: 'https://hooks.example.com/', body: item, createdAt: item.createdAt }] } },
  };
  return { clock, store, deps, calls, behave, connector, service: new ExecutionService(deps) };
}

export type Harness = ReturnType<typeof harness>;

/** The outcome as the kind a test expects (its assertion fails, naming what came instead, when it is another). */
export function outcomeOf<K extends ExecutionOutcome['kind']>(outcome: ExecutionOutcome, kind: K): Extract<ExecutionOutcome, { kind: K }> {
  if (outcome.kind !== kind) {
    const detail = outcome.kind === 'failed' ? `${outcome.error.code}: ${outcome.error.message}` : outcome.kind === 'refused' ? outcome.refusal.matchedRuleId : '';
    throw new Error(`expected the outcome '${kind}', got '${outcome.kind}' ${detail}`);
  }
  return outcome as Extract<ExecutionOutcome, { kind: K }>;
}

/** Every decision the store kept for the impact preview of `policyName`, newest first. */
export async function keptDecisions(store: InMemoryExecutionStore, policyName = POLICY): Promise<RecordedDecision[]> {
  const out: RecordedDecision[] = [];
  for await (const d of store.latest(policyName, 1000)) out.push(d);
  return out;
}

import { DomainError } from '../shared/errors.js';
import type { Caller } from '../identity/caller.js';
import { mayAssertPrincipal, mayRequestCapability, mayUseTenant } from '../identity/caller.js';
import type { Clock, IdGenerator } from '../ports/clock.js';
import type { Hasher, Signer } from '../ports/crypto.js';
import type { CompiledPolicy, PolicyDecision, PolicyDocument } from '../policy/index.js';
import { evaluatePolicy } from '../policy/index.js';
import { buildTrustRecord, transactionHash } from './chain.js';
import { ConnectorError, type ConnectorRegistry } from './connectors.js';
import { DuplicateTransactionError, type ExecutionStore, type TransactionClaim } from './ports.js';
import type {
  Assessment,
  BusinessTransaction,
  ExecutionIntent,
  ExecutionTrustRecord,
  PolicyBinding,
  RefusalRecord,
  ReleaseContext,
  SignedTrustRecord,
} from './records.js';
import { parseBusinessTransaction } from './transaction-request.js';

/** A published, approved policy version, compiled once. */
export interface PublishedPolicy {
  document: PolicyDocument;
  contentHash: string;
  compiled: CompiledPolicy;
}

export interface PolicyCatalog {
  find(name: string, version: string): Promise<PublishedPolicy | undefined>;
}

/** Test seams that only sandbox mode wires (crash tests pause between the pipeline's steps). */
export interface ExecutionHooks {
  afterRelease?(tx: BusinessTransaction): Promise<void>;
}

export interface ExecutionDeps {
  store: ExecutionStore;
  signer: Signer;
  hasher: Hasher;
  clock: Clock;
  ids: IdGenerator;
  policies: PolicyCatalog;
  connectors: ConnectorRegistry;
  hooks?: ExecutionHooks;
  /** Skips the principal and tenant rules (SVC_AUTH_DISABLED, spec 5.4). */
  isAuthDisabled?(caller: Caller): boolean;
}

export type ExecutionOutcome =
  | { kind: 'executed'; record: SignedTrustRecord; result: unknown }
  | { kind: 'recorded'; record: SignedTrustRecord }
  | { kind: 'pending-override'; record: SignedTrustRecord };

export const PRINCIPAL_NOT_PERMITTED = 'Caller is not permitted to assert this authority.principalId.';

const fail = (kind: DomainError['kind'], message: string, code?: DomainError['code'], extra?: Record<string, string>, cause?: unknown) =>
  new DomainError(kind, message, code, extra, { cause });

/**
 * The pipeline of `POST /execute` (release) and `POST /transactions` (record only): validate,
 * caller rules, policy, connector, decision; then either a signed refusal, or a signed intent that
 * is durably stored BEFORE the connector is called, the release, and the signed Trust Record.
 */
export class ExecutionService {
  constructor(private readonly d: ExecutionDeps) {}

  async run(caller: Caller, body: unknown, mode: 'release' | 'record'): Promise<ExecutionOutcome> {
    const tx = parseBusinessTransaction(body);
    const unchecked = this.d.isAuthDisabled?.(caller) ?? false;
    if (!unchecked && !mayAssertPrincipal(caller, tx.authority.principalId)) throw fail('forbidden', PRINCIPAL_NOT_PERMITTED);
    if (!unchecked && !mayUseTenant(caller, tx.metadata.tenantId)) {
      throw fail('forbidden', 'Caller is not permitted to act for this metadata.tenantId.', 'TENANT_NOT_ALLOWED');
    }
    if (!mayRequestCapability(caller, tx.intent.action)) {
      throw fail('forbidden', `Caller is not permitted to request capability '${tx.intent.action}'.`, 'CAPABILITY_NOT_ALLOWED');
    }
    const policy = await this.d.policies.find(tx.policy.name, tx.policy.version);
    if (!policy) throw fail('not_found', `Policy '${tx.policy.name}' version '${tx.policy.version}' was not found.`);
    const connector = this.d.connectors.find(tx.intent.action);
    if (!connector) {
      throw fail('unavailable', `No connector is registered for action '${tx.intent.action}'.`, 'CONNECTOR_NOT_REGISTERED');
    }
    if (await this.d.store.isClaimed(tx.businessTransactionId)) throw duplicate(tx.businessTransactionId);

    const binding: PolicyBinding = { name: tx.policy.name, version: tx.policy.version, contentHash: policy.contentHash };
    const decision = evaluatePolicy(policy.compiled, { signals: tx.signals, intent: { action: tx.intent.action, parameters: tx.intent.parameters } });
    const now = this.d.clock.now().toISOString();
    const btxHash = transactionHash(this.d.hasher, tx);
    const claim = (outcome: TransactionClaim['outcome']): TransactionClaim => ({
      businessTransactionId: tx.businessTransactionId,
      callerId: caller.callerId,
      outcome,
      createdAt: now,
    });

    if (decision.action === 'reject') {
      await this.refuse(caller, tx, btxHash, binding, decision, claim('REFUSED'), now);
      throw fail('forbidden', `Execution rejected: ${decision.reason}`, 'POLICY_DENIED');
    }

    const assessment = (execution: Assessment['execution']['status']): Assessment => ({
      authority: { status: 'VERIFIED', callerId: caller.callerId, principalId: tx.authority.principalId, grant: null },
      businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
      execution: { status: execution },
    });

    if (mode === 'record' || decision.requires_override) {
      const record = await this.sign<ExecutionTrustRecord>({
        recordType: 'execution-trust-record',
        businessTransactionId: tx.businessTransactionId,
        businessTransactionHash: btxHash,
        callerId: caller.callerId,
        transaction: { ...tx, policy: { ...tx.policy, contentHash: policy.contentHash } },
        decision,
        assessment: assessment('NOT_RELEASED'),
        executions: [],
        recordedAt: now,
      });
      await this.claimed(() => this.d.store.storeRecordedTransaction(claim('RECORDED'), record), tx.businessTransactionId, 'EXECUTION_RECORD_INCOMPLETE');
      return mode === 'record' ? { kind: 'recorded', record } : { kind: 'pending-override', record };
    }

    // 1. The signed intent is durably committed before anything is released.
    const intent = await this.sign<ExecutionIntent>({
      recordType: 'execution-intent',
      businessTransactionId: tx.businessTransactionId,
      businessTransactionHash: btxHash,
      action: tx.intent.action,
      connector: connector.namespace,
      callerId: caller.callerId,
      principalId: tx.authority.principalId,
      ...(tx.metadata.tenantId !== undefined ? { tenantId: tx.metadata.tenantId } : {}),
      policy: binding,
      decision,
      preparedAt: now,
    });
    await this.claimed(() => this.d.store.prepareIntent(claim('EXECUTING'), intent, now), tx.businessTransactionId, 'EXECUTION_INTENT_UNAVAILABLE');

    // 2. Release.
    const releasedAt = this.d.clock.now().toISOString();
    let result: unknown;
    try {
      ({ result } = await connector.release({
        businessTransactionId: tx.businessTransactionId,
        action: tx.intent.action,
        parameters: tx.intent.parameters,
        intentHash: btxHash,
      }));
    } catch (e) {
      const phase = e instanceof ConnectorError ? e.phase : 'outcome-unknown';
      await this.d.store
        .markErrored(tx.businessTransactionId, { phase, message: e instanceof Error ? e.message : String(e) }, this.d.clock.now().toISOString())
        .catch(() => undefined); // stays PREPARED: listed for reconciliation either way
      if (phase === 'before-send') {
        throw fail('bad_gateway', 'The connector failed before sending; the action was not executed.', 'RUNTIME_ERROR', { executionStatus: 'NOT_EXECUTED' }, e);
      }
      throw fail('bad_gateway', 'The outcome of the release is unknown; the intent must be reconciled.', 'EXECUTION_OUTCOME_UNKNOWN', { executionStatus: 'EXECUTION_UNKNOWN' }, e);
    }

    // 3. RELEASED with the context the Trust Record can be rebuilt from.
    const completedAt = this.d.clock.now().toISOString();
    const context: ReleaseContext = {
      transaction: tx,
      decision,
      policy: binding,
      assessment: assessment('EXECUTED'),
      execution: {
        executionId: this.d.ids.uuid(),
        connector: connector.namespace,
        action: tx.intent.action,
        status: 'SUCCEEDED',
        releasedAt,
        completedAt,
        resultHash: this.d.hasher.contentHash(result ?? null),
        result: result ?? null,
      },
    };
    try {
      await this.d.store.markReleased(tx.businessTransactionId, context, completedAt);
    } catch (e) {
      throw fail('unavailable', 'The action was executed but its result could not be recorded; the intent must be reconciled.', 'EXECUTION_INTENT_RESULT_NOT_RECORDED', { executionStatus: 'EXECUTED' }, e);
    }
    await this.d.hooks?.afterRelease?.(tx);

    // 4. FINALIZED with the signed, chained Trust Record.
    const record = await this.finalize(tx.businessTransactionId, context, caller.callerId, btxHash).catch((e: unknown) => {
      throw fail('unavailable', 'The action was executed; its Trust Record will be completed at the next start.', 'EXECUTION_RECORD_INCOMPLETE', { executionStatus: 'EXECUTED' }, e);
    });
    if (!record) {
      throw fail('unavailable', 'The action was executed; its Trust Record was completed elsewhere.', 'EXECUTION_RECORD_INCOMPLETE', { executionStatus: 'EXECUTED' });
    }
    return { kind: 'executed', record, result: context.execution.result };
  }

  /** Finalizes a RELEASED intent from its context (request path and restart recovery). */
  finalize(id: string, context: ReleaseContext, callerId: string, businessTransactionHash: string): Promise<SignedTrustRecord | undefined> {
    const at = this.d.clock.now().toISOString();
    return this.d.store.finalize(id, (head) => buildTrustRecord(this.d, context, head, callerId, at, businessTransactionHash), at);
  }

  /** At start: every intent a crash left RELEASED gets its Trust Record. Returns how many. */
  async recoverReleased(): Promise<number> {
    let done = 0;
    for (const { intent } of await this.d.store.listIntents(['RELEASED'], 10_000)) {
      const context = await this.d.store.getReleaseContext(intent.businessTransactionId);
      if (context && (await this.finalize(intent.businessTransactionId, context, intent.callerId, intent.businessTransactionHash))) done++;
    }
    return done;
  }

  private async refuse(
    caller: Caller,
    tx: BusinessTransaction,
    btxHash: string,
    binding: PolicyBinding,
    decision: PolicyDecision,
    claim: TransactionClaim,
    now: string,
  ): Promise<void> {
    const refusal = await this.sign<RefusalRecord>({
      recordType: 'refusal-record',
      businessTransactionId: tx.businessTransactionId,
      businessTransactionHash: btxHash,
      callerId: caller.callerId,
      principalId: tx.authority.principalId,
      action: tx.intent.action,
      policy: { name: binding.name, version: binding.version },
      policyContentHash: binding.contentHash,
      decision,
      matchedRuleId: decision.matchedRuleId,
      reason: decision.reason,
      assessment: {
        authority: { status: 'VERIFIED', callerId: caller.callerId, principalId: tx.authority.principalId, grant: null },
        businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
        execution: { status: 'REFUSED' },
      },
      refusedAt: now,
    });
    await this.claimed(() => this.d.store.storeRefusal(claim, refusal), tx.businessTransactionId, 'EXECUTION_RECORD_INCOMPLETE');
  }

  private async sign<T extends object>(record: T) {
    try {
      return await this.d.signer.sign(record);
    } catch (e) {
      throw fail('unavailable', 'Signing is unavailable; nothing was executed.', 'SIGNING_UNAVAILABLE', undefined, e);
    }
  }

  private async claimed(write: () => Promise<void>, id: string, code: DomainError['code']): Promise<void> {
    try {
      await write();
    } catch (e) {
      if (e instanceof DuplicateTransactionError) throw duplicate(id);
      throw fail('unavailable', 'Storage is unavailable; nothing was executed.', code, undefined, e);
    }
  }
}

const duplicate = (id: string) => new DomainError('conflict', `Business Transaction '${id}' already exists.`);

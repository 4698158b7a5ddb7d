/**
 * The execution pipeline over the in-memory store (which passes the stores' contract suite) and
 * fakes of every other port: each way a request can end, as a value or as a thrown admission error;
 * what is stored and what is released in each; the order of the stages; the phases as data.
 */
import { describe, expect, it } from '@jest/globals';
import { fakeHasher } from '../attestation/testing.js';
import { AUTHORITY_EXPIRED_RULE_ID, BOUND_SIGNAL_MISMATCH_RULE_ID, NOT_AUTHORIZED_RULE_ID, SOURCE_MISMATCH_RULE_ID, SOURCE_UNAVAILABLE_RULE_ID } from '../policy/document.js';
import { DomainError, forbidden } from '../shared/errors.js';
import { transactionHash } from './chain.js';
import { ConnectorError } from './connectors.js';
import type { ExecutionOutcome, OutcomeContext } from './context.js';
import type { DecidedTransaction } from './decided.js';
import { PRINCIPAL_NOT_PERMITTED, refusalDecision } from './decision-stages.js';
import { executionPhases, ExecutionService } from './execution-service.js';
import { InMemoryExecutionStore } from './in-memory-store.js';
import { recordReleaseInTwoSteps } from './outcome-stages.js';
import { insertAfter, stage } from './pipeline.js';
import { EVERY_CALLER as ALL, INTENT_IN_FLIGHT_LEASE_MS, type CompletedRelease } from './ports.js';
import type { BusinessTransaction, IntentState } from './records.js';
import { caller, grantOf, harness, iso, keptDecisions, outcomeOf, POLICY, T0, trustedSignal, txOf, VERSIONS, type Harness } from './testing.js';

const policyOf = (version: string): BusinessTransaction['policy'] => ({ name: POLICY, version });
const stateOf = async (h: Harness, id: string): Promise<IntentState | undefined> => (await h.store.getIntent(id, ALL))?.status.state;

describe('the execution pipeline', () => {
  describe('outcomes, as values', () => {
    it('executed: the intent stored, the action released once, the chained Trust Record stored; times from the clock', async () => {
      const h = harness();
      h.behave.release = async () => {
        h.clock.advance(5000);
        return { result: { transferId: 'tr-1' } };
      };
      const tx = txOf();
      const id = tx.businessTransactionId;

      const { record, result } = outcomeOf(await h.service.execute({ caller, tx }), 'executed');

      expect(result).toEqual({ transferId: 'tr-1' });
      expect(h.calls.released).toEqual([
        { businessTransactionId: id, action: 'payments:transfer', parameters: tx.intent.parameters, intentHash: transactionHash(fakeHasher, tx), conditions: [] },
      ]);
      expect(record).toMatchObject({ businessTransactionId: id, callerId: caller.callerId, recordedAt: iso(T0 + 5000), decision: { action: 'approve', matchedRuleId: 'ok' } });
      expect(record.executions).toEqual([
        expect.objectContaining({
          executionId: 'exec-1',
          connector: 'payments',
          status: 'SUCCEEDED',
          releasedAt: iso(T0),
          completedAt: iso(T0 + 5000),
          result: { transferId: 'tr-1' },
          resultHash: fakeHasher.contentHash({ transferId: 'tr-1' }),
          previousChainHash: null,
        }),
      ]);
      expect(record.assessment).toEqual({
        authority: { status: 'VERIFIED', callerId: caller.callerId, principalId: 'agent-7', grant: null },
        businessValidation: { status: 'NOT_REQUIRED', sourcedSignals: [] },
        execution: { status: 'EXECUTED' },
      });
      const stored = (await h.store.getIntent(id, ALL))!;
      expect(stored.intent).toMatchObject({ recordType: 'execution-intent', preparedAt: iso(T0), connector: 'payments', businessTransactionHash: transactionHash(fakeHasher, tx) });
      expect(stored.status).toEqual({ state: 'FINALIZED', updatedAt: iso(T0 + 5000) });
      expect(await h.store.getTrustRecord(id, ALL)).toEqual(record);
      expect((await h.store.getClaim(id, ALL))!.outcome).toBe('EXECUTED');
      expect(h.store.chainHead()).toEqual({ chainHash: record.executions[0]!.chainHash, position: 1 });
      // The policy's decision is kept with the claim for the impact preview.
      expect(await keptDecisions(h.store)).toEqual([
        { businessTransactionId: id, decidedAt: iso(T0), policyName: POLICY, policyVersion: VERSIONS.plain, action: 'approve', matchedRuleId: 'ok', input: { signals: tx.signals, intent: { action: 'payments:transfer', parameters: tx.intent.parameters } } },
      ]);

      // The next release links to this one.
      const next = outcomeOf(await h.service.execute({ caller, tx: txOf() }), 'executed');
      expect(next.record.executions[0]!.previousChainHash).toBe(record.executions[0]!.chainHash);
      expect(h.store.chainHead().position).toBe(2);
    });

    it('recorded: `record` stores a Trust Record without release, whatever the decision but a rejection', async () => {
      const h = harness();
      for (const amount of [100, 20_000]) {
        const tx = txOf({ signals: { amount, country: 'DE' } });
        const { record } = outcomeOf(await h.service.record({ caller, tx }), 'recorded');
        expect(record).toMatchObject({ executions: [], recordedAt: iso(T0), assessment: { execution: { status: 'NOT_RELEASED' } } });
        expect(record.decision.requires_override).toBe(amount > 10_000);
        expect(await h.store.getTrustRecord(tx.businessTransactionId, ALL)).toEqual(record);
        expect((await h.store.getClaim(tx.businessTransactionId, ALL))!.outcome).toBe('RECORDED');
        expect(await h.store.getIntent(tx.businessTransactionId, ALL)).toBeUndefined();
      }
      expect(h.calls.released).toEqual([]);
      expect(h.store.chainHead()).toEqual({ chainHash: null, position: 0 });
    });

    it('held: a requires_override decision without an approval is recorded and held for a human; nothing is released', async () => {
      const h = harness();
      const tx = txOf({ signals: { amount: 20_000, country: 'DE' } });
      const { record } = outcomeOf(await h.service.execute({ caller, tx }), 'held');
      expect(record.decision).toMatchObject({ action: 'approve', requires_override: true, matchedRuleId: 'large' });
      expect(record.executions).toEqual([]);
      expect(await h.store.getTrustRecord(tx.businessTransactionId, ALL)).toEqual(record);
      expect((await h.store.getClaim(tx.businessTransactionId, ALL))!.outcome).toBe('HELD');
      const held = await h.store.getHeld(tx.businessTransactionId, ALL);
      expect(held).toMatchObject({ status: 'PENDING', decided: { decision: { requires_override: true } } });
      // It waits the deployment's time for a human, and is announced once.
      expect(Date.parse(held!.expiresAt) - Date.parse(held!.createdAt)).toBe(86_400_000);
      expect(h.store.notices.map((n) => n.deliveryId)).toEqual([`notice-${tx.businessTransactionId}`]);
      expect([h.calls.released, h.calls.approvals]).toEqual([[], []]);
    });

    it('a requires_override decision with a signed approval that is accepted is released', async () => {
      const h = harness();
      const approval = { envelope: 'signed by a checker' };
      const tx = txOf({ signals: { amount: 20_000, country: 'DE' }, authorization: { authorityId: 'auth-1', approval } });
      outcomeOf(await h.service.execute({ caller, tx }), 'executed');
      expect(h.calls.approvals).toEqual([approval]);
      expect(h.calls.released).toHaveLength(1);
    });

    it('an approval that is not accepted is thrown, and nothing is stored or released', async () => {
      const h = harness();
      h.behave.accept = async () => {
        throw forbidden('The approval is not valid.', 'APPROVAL_INVALID');
      };
      const tx = txOf({ signals: { amount: 20_000, country: 'DE' }, authorization: { authorityId: 'auth-1', approval: { envelope: 'forged' } } });
      await expect(h.service.execute({ caller, tx })).rejects.toMatchObject({ kind: 'forbidden', code: 'APPROVAL_INVALID' });
      expect(await h.store.isClaimed(tx.businessTransactionId)).toBe(false);
      expect(h.calls.released).toEqual([]);
    });

    it('refused by a rule: a signed Refusal Record, the decision kept, nothing released', async () => {
      const h = harness();
      const tx = txOf({ signals: { amount: 100, country: 'KP' } });
      const { refusal } = outcomeOf(await h.service.execute({ caller, tx }), 'refused');
      expect(refusal).toMatchObject({
        recordType: 'refusal-record',
        businessTransactionId: tx.businessTransactionId,
        matchedRuleId: 'sanctioned',
        reason: 'Country is sanctioned',
        refusedAt: iso(T0),
        assessment: { execution: { status: 'REFUSED' } },
        keyId: 'k1',
      });
      expect(await h.store.getRefusal(tx.businessTransactionId, ALL)).toEqual(refusal);
      expect((await h.store.getClaim(tx.businessTransactionId, ALL))!.outcome).toBe('REFUSED');
      expect((await keptDecisions(h.store)).map((d) => [d.action, d.matchedRuleId])).toEqual([['reject', 'sanctioned']]);
      expect(h.calls.released).toEqual([]);
      // `record` refuses a rejection the same way.
      outcomeOf(await h.service.record({ caller, tx: txOf({ signals: { amount: 1, country: 'IR' } }) }), 'refused');
    });

    describe('refused by business validation: matchedRuleId says why, and the policy\'s rules never decided', () => {
      const fact = { signal: 'amount', binding: { source: 'erp', fact: 'invoice.amount', subject: 'intent.parameters.invoiceId' }, type: 'number' as const };
      const cases: { name: string; version: string; rule: string; arrange?: (h: Harness) => void; tx?: Partial<BusinessTransaction>; assessment: object }[] = [
        {
          name: 'no authority grant',
          version: VERSIONS.grant,
          rule: NOT_AUTHORIZED_RULE_ID,
          assessment: { authority: { status: 'FAILED', grant: null }, businessValidation: { status: 'NOT_REQUIRED' } },
        },
        {
          name: 'outside the grant\'s limits',
          version: VERSIONS.grant,
          rule: NOT_AUTHORIZED_RULE_ID,
          arrange: (h) => void h.behave.grants.push(grantOf({ limits: [{ path: 'intent.parameters.amount', max: 50 }] })),
          assessment: { authority: { status: 'FAILED', grant: { grantId: 'grant-1', limits: [{ path: 'intent.parameters.amount', max: 50 }] } } },
        },
        {
          name: 'a grant that has expired',
          version: VERSIONS.grant,
          rule: AUTHORITY_EXPIRED_RULE_ID,
          arrange: (h) => void h.behave.grants.push(grantOf({ expiresAt: iso(T0 - 1) })),
          assessment: { authority: { status: 'FAILED', grant: { grantId: 'grant-1', expiresAt: iso(T0 - 1) } } },
        },
        {
          name: 'a source that cannot be asked',
          version: VERSIONS.sourced,
          rule: SOURCE_UNAVAILABLE_RULE_ID,
          arrange: (h) => void (h.behave.ask = async () => ({ ok: false, reason: 'erp: timed out' })),
          assessment: { businessValidation: { status: 'FAILED', sourcedSignals: [] } },
        },
        {
          name: 'a caller value that differs from the source\'s',
          version: VERSIONS.sourced,
          rule: SOURCE_MISMATCH_RULE_ID,
          arrange: (h) => void (h.behave.ask = async () => ({ ok: true, signals: [trustedSignal(fact, 90, iso(T0 + 60_000), iso(T0))] })),
          assessment: { businessValidation: { status: 'FAILED', sourcedSignals: [expect.objectContaining({ signal: 'amount', value: 90 })] } },
        },
        {
          name: 'a bound signal that differs from the value released',
          version: VERSIONS.bound,
          rule: BOUND_SIGNAL_MISMATCH_RULE_ID,
          tx: { intent: { action: 'payments:transfer', parameters: { amount: 250, invoiceId: 'inv-1' } } },
          assessment: { businessValidation: { status: 'FAILED' } },
        },
      ];

      it.each(cases)('$rule: $name', async ({ version, rule, arrange, tx: change, assessment }) => {
        const h = harness();
        arrange?.(h);
        const tx = txOf({ policy: policyOf(version), ...change });
        const { refusal } = outcomeOf(await h.service.execute({ caller, tx }), 'refused');
        expect(refusal).toMatchObject({ matchedRuleId: rule, decision: { action: 'reject', matchedRuleId: rule }, assessment: { ...assessment, execution: { status: 'REFUSED' } } });
        expect(await h.store.getRefusal(tx.businessTransactionId, ALL)).toEqual(refusal);
        // Only a decision of the policy's rules is replayable by the impact preview.
        expect(await keptDecisions(h.store)).toEqual([]);
        expect(h.calls.released).toEqual([]);
      });

      it('a grant in force and answering sources: verified, and carried into the record and the release', async () => {
        const h = harness();
        h.behave.grants.push(grantOf({ limits: [{ path: 'intent.parameters.amount', max: 500 }] }));
        const { record } = outcomeOf(await h.service.execute({ caller, tx: txOf({ policy: policyOf(VERSIONS.grantAndSourced) }) }), 'executed');
        expect(record.assessment).toMatchObject({
          authority: { status: 'VERIFIED', grant: { grantId: 'grant-1', limits: [{ path: 'intent.parameters.amount', max: 500 }] } },
          businessValidation: { status: 'VERIFIED', sourcedSignals: [expect.objectContaining({ signal: 'amount', value: 100, source: 'erp' })] },
        });
        expect(h.calls.released[0]!.conditions).toEqual([{ signal: 'amount', value: 100, validUntil: iso(T0 + 60_000), source: 'erp' }]);
      });
    });

    describe('failed: the intent was stored, and the release did not complete as it should', () => {
      /** What changes between the decision and the release, found by the re-check; the clock or the fakes. */
      const changes: { name: string; version: string; change: (h: Harness) => void; says: RegExp }[] = [
        { name: 'a fact past its validUntil', version: VERSIONS.sourced, change: (h) => h.clock.advance(61_000), says: /held only until/ },
        {
          name: 'a source that answers another value',
          version: VERSIONS.sourced,
          change: (h) => void (h.behave.ask = async (facts) => ({ ok: true, signals: facts.map((f) => trustedSignal(f, 120, iso(h.clock.ms + 60_000), iso(h.clock.ms))) })),
          says: /no longer answers the value/,
        },
        { name: 'a source that cannot be asked again', version: VERSIONS.sourced, change: (h) => void (h.behave.ask = async () => ({ ok: false, reason: 'erp: down' })), says: /cannot be asked again/ },
        { name: 'a grant revoked', version: VERSIONS.grant, change: (h) => void (h.behave.grants[0]!.revokedAt = iso(h.clock.ms)), says: /revoked or has expired/ },
      ];

      it.each(changes)('a re-check at release that fails releases nothing (NOT_EXECUTED): $name', async ({ version, change, says }) => {
        const h = harness();
        h.behave.grants.push(grantOf());
        // The change happens right after the intent is stored, before the re-check.
        const phases = executionPhases(h.deps);
        const service = new ExecutionService(h.deps, { ...phases, execute: insertAfter(phases.execute, 'store the intent', stage('meanwhile', async () => change(h))) });
        const tx = txOf({ policy: policyOf(version) });
        const { error } = outcomeOf(await service.execute({ caller, tx }), 'failed');
        expect(error).toMatchObject({ kind: 'conflict', code: 'AUTHORIZATION_NO_LONGER_VALID', extra: { executionStatus: 'NOT_EXECUTED' } });
        expect(error.message).toMatch(says);
        expect((await h.store.getIntent(tx.businessTransactionId, ALL))!.status).toMatchObject({ state: 'ERRORED', error: { phase: 'recheck-failed' } });
        expect(h.calls.released).toEqual([]);
        expect(await h.store.hasTrustRecord(tx.businessTransactionId, ALL)).toBe(false);
      });

      it.each([
        { thrown: new ConnectorError('before-send', 'no route to the bank'), kind: 'bad_gateway', code: 'RUNTIME_ERROR', status: 'NOT_EXECUTED', phase: 'before-send' },
        { thrown: new ConnectorError('conditions-not-met', 'the bank saw an expired condition'), kind: 'conflict', code: 'AUTHORIZATION_NO_LONGER_VALID', status: 'NOT_EXECUTED', phase: 'conditions-not-met' },
        { thrown: new Error('socket hang up'), kind: 'bad_gateway', code: 'EXECUTION_OUTCOME_UNKNOWN', status: 'EXECUTION_UNKNOWN', phase: 'outcome-unknown' },
      ])('the connector fails: $code ($status), the intent ERRORED with phase $phase', async ({ thrown, kind, code, status, phase }) => {
        const h = harness();
        h.behave.release = async () => {
          throw thrown;
        };
        const tx = txOf();
        const { error } = outcomeOf(await h.service.execute({ caller, tx }), 'failed');
        expect(error).toMatchObject({ kind, code, extra: { executionStatus: status } });
        expect(error.cause).toBe(thrown);
        expect((await h.store.getIntent(tx.businessTransactionId, ALL))!.status).toEqual({ state: 'ERRORED', updatedAt: iso(T0), error: { phase, message: thrown.message } });
        expect((await h.store.getClaim(tx.businessTransactionId, ALL))!.outcome).toBe('EXECUTING');
        expect(await h.store.hasTrustRecord(tx.businessTransactionId, ALL)).toBe(false);
        expect(h.calls.released).toHaveLength(1);
      });

      it('executed, but the store could not record it: EXECUTION_INTENT_RESULT_NOT_RECORDED (EXECUTED), the intent left for reconciliation', async () => {
        class StoreThatFailsToComplete extends InMemoryExecutionStore {
          override completeRelease(): Promise<CompletedRelease> {
            return Promise.reject(new Error('disk full'));
          }
        }
        const h = harness({ store: new StoreThatFailsToComplete({ hasher: fakeHasher }) });
        const tx = txOf();
        const { error } = outcomeOf(await h.service.execute({ caller, tx }), 'failed');
        expect(error).toMatchObject({ kind: 'unavailable', code: 'EXECUTION_INTENT_RESULT_NOT_RECORDED', extra: { executionStatus: 'EXECUTED' } });
        expect(h.calls.released).toHaveLength(1);
        expect(await stateOf(h, tx.businessTransactionId)).toBe('PREPARED');
      });

      it('executed, but its record could not be built: EXECUTION_RECORD_INCOMPLETE (EXECUTED); recoverReleased completes it at the next start', async () => {
        const h = harness();
        h.behave.chainSigning = false;
        const tx = txOf();
        const { error } = outcomeOf(await h.service.execute({ caller, tx }), 'failed');
        expect(error).toMatchObject({ kind: 'unavailable', code: 'EXECUTION_RECORD_INCOMPLETE', extra: { executionStatus: 'EXECUTED' } });
        expect(await stateOf(h, tx.businessTransactionId)).toBe('RELEASED');
        expect(await h.store.getReleaseContext(tx.businessTransactionId)).toMatchObject({ execution: { result: { transferId: 'tr-1' } } });

        // The next start, with the key back.
        h.behave.chainSigning = true;
        h.clock.advance(60_000);
        expect(await new ExecutionService(h.deps).recoverReleased()).toBe(1);
        const record = (await h.store.getTrustRecord(tx.businessTransactionId, ALL))!;
        expect(record).toMatchObject({ recordedAt: iso(T0 + 60_000), executions: [{ releasedAt: iso(T0), previousChainHash: null, result: { transferId: 'tr-1' } }] });
        expect(await stateOf(h, tx.businessTransactionId)).toBe('FINALIZED');
        expect(h.calls.released).toHaveLength(1);
        expect(await h.service.recoverReleased()).toBe(0);
      });
    });
  });

  describe('admission errors are thrown, and nothing is stored, asked or released', () => {
    const anyAction = { ...caller, allowedCapabilities: ['*'] };
    const admissions: { name: string; who?: typeof caller; tx: Partial<BusinessTransaction>; error: Partial<DomainError> }[] = [
      { name: 'a principal the caller may not assert', tx: { authority: { principalId: 'someone-else', authorityId: 'auth-1' } }, error: { kind: 'forbidden', message: PRINCIPAL_NOT_PERMITTED } },
      { name: 'a tenant the caller may not use', tx: { metadata: { tenantId: 't-2' } }, error: { kind: 'forbidden', code: 'TENANT_NOT_ALLOWED' } },
      { name: 'a capability the caller may not request', tx: { intent: { action: 'payments:refund', parameters: {} } }, error: { kind: 'forbidden', code: 'CAPABILITY_NOT_ALLOWED' } },
      { name: 'a policy version not published', tx: { policy: policyOf('9.9.9') }, error: { kind: 'not_found', message: `Policy '${POLICY}' version '9.9.9' was not found.` } },
      { name: 'an action no connector serves', who: anyAction, tx: { intent: { action: 'ledger:post', parameters: {} } }, error: { kind: 'unavailable', code: 'CONNECTOR_NOT_REGISTERED' } },
    ];
    it.each(admissions)('$name', async ({ tx: change, who, error }) => {
      const h = harness();
      const tx = txOf(change);
      for (const run of [h.service.execute.bind(h.service), h.service.record.bind(h.service)]) {
        const thrown = await run({ caller: who ?? caller, tx }).catch((e: unknown) => e);
        expect(thrown).toBeInstanceOf(DomainError);
        expect(thrown).toMatchObject(error);
      }
      expect(await h.store.isClaimed(tx.businessTransactionId)).toBe(false);
      expect([h.calls.sources, h.calls.grants, h.calls.released]).toEqual([[], [], []]);
    });

    it('a duplicate id: 409 before anything is asked, and of concurrent requests with one id exactly one is released', async () => {
      const h = harness();
      const tx = txOf({ policy: policyOf(VERSIONS.sourced) });
      outcomeOf(await h.service.execute({ caller, tx }), 'executed');
      const asked = h.calls.sources.length;
      for (const run of [h.service.execute.bind(h.service), h.service.record.bind(h.service)]) {
        await expect(run({ caller, tx })).rejects.toMatchObject({ kind: 'conflict', message: `Business Transaction '${tx.businessTransactionId}' already exists.` });
      }
      expect(h.calls.sources).toHaveLength(asked);

      // Both pass the early check; the claim decides.
      const raced = txOf();
      const results = await Promise.allSettled(Array.from({ length: 5 }, () => h.service.execute({ caller, tx: raced })));
      expect(results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<ExecutionOutcome>).value.kind)).toEqual(['executed']);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ kind: 'conflict' });
      expect(h.calls.released.filter((r) => r.businessTransactionId === raced.businessTransactionId)).toHaveLength(1);
    });

    it('with authentication disabled the principal and tenant rules are skipped, the capability rule is not', async () => {
      const h = harness();
      h.deps.isAuthDisabled = () => true;
      const tx = txOf({ authority: { principalId: 'someone-else', authorityId: 'auth-1' }, metadata: { tenantId: 't-2' } });
      outcomeOf(await h.service.execute({ caller, tx }), 'executed');
      await expect(h.service.execute({ caller, tx: txOf({ intent: { action: 'payments:refund', parameters: {} } }) })).rejects.toMatchObject({ code: 'CAPABILITY_NOT_ALLOWED' });
    });

    it('a storage failure when claiming is 503 with nothing executed', async () => {
      class StoreThatCannotClaim extends InMemoryExecutionStore {
        override prepareIntent(): Promise<void> {
          return Promise.reject(new Error('connection reset'));
        }
      }
      const h = harness({ store: new StoreThatCannotClaim({ hasher: fakeHasher }) });
      await expect(h.service.execute({ caller, tx: txOf() })).rejects.toMatchObject({ kind: 'unavailable', code: 'EXECUTION_INTENT_UNAVAILABLE' });
      expect(h.calls.released).toEqual([]);
    });
  });

  describe('the order of the stages', () => {
    it('runs the phases in the documented order', () => {
      const phases = executionPhases(harness().deps);
      expect(phases.decision.map((s) => s.name)).toEqual([
        'caller rules',
        'policy version',
        'connector',
        'duplicate id',
        'authority grant',
        'ask the sources',
        'source mismatch',
        'bound signals',
        'decide',
      ]);
      expect(phases.execute.map((s) => s.name)).toEqual(['refuse a rejection', 'signed approval', 'hold for an override', 'store the intent', 're-check at release', 'release', 'record the release']);
      expect(phases.record.map((s) => s.name)).toEqual(['refuse a rejection', 'record without release']);
    });

    it('admission comes first: a caller who may not assert the principal makes no policy or connector be looked up', async () => {
      const h = harness();
      await expect(h.service.execute({ caller, tx: txOf({ authority: { principalId: 'mallory', authorityId: 'auth-1' } }) })).rejects.toThrow(PRINCIPAL_NOT_PERMITTED);
      expect([h.calls.policies, h.calls.connectors]).toEqual([[], []]);
    });

    it('no source is asked for a caller without a grant; with one, the sources are asked at decision and again at release', async () => {
      const h = harness();
      const refused = outcomeOf(await h.service.execute({ caller, tx: txOf({ policy: policyOf(VERSIONS.grantAndSourced) }) }), 'refused');
      expect(refused.refusal.matchedRuleId).toBe(NOT_AUTHORIZED_RULE_ID);
      expect(h.calls.sources).toEqual([]);

      h.behave.grants.push(grantOf());
      outcomeOf(await h.service.execute({ caller, tx: txOf({ policy: policyOf(VERSIONS.grantAndSourced) }) }), 'executed');
      expect(h.calls.sources).toHaveLength(2);
    });

    it('the signed intent is durably stored, in flight, before the connector is called; the re-check runs between the two', async () => {
      const h = harness();
      const tx = txOf({ policy: policyOf(VERSIONS.sourced) });
      const id = tx.businessTransactionId;
      const seen: { at: string; state?: IntentState; inFlightUntil?: string; released: number; resolve?: string }[] = [];
      const ask = h.behave.ask;
      h.behave.ask = async (facts) => {
        seen.push({ at: 'ask', state: await stateOf(h, id), released: h.calls.released.length });
        return ask(facts);
      };
      h.behave.release = async () => {
        const stored = await h.store.getIntent(id, ALL);
        // A resolution is refused while the request may still release the action.
        const resolve = await h.store.resolve(id, { found: 'NOT_EXECUTED', note: 'n', resolvedBy: 'op', resolvedAt: iso(h.clock.ms) }, iso(h.clock.ms));
        seen.push({ at: 'release', state: stored?.status.state, inFlightUntil: stored?.status.inFlightUntil, released: h.calls.released.length, resolve: resolve.outcome });
        return { result: { ok: true } };
      };
      outcomeOf(await h.service.execute({ caller, tx }), 'executed');
      expect(seen).toEqual([
        { at: 'ask', state: undefined, released: 0 },
        { at: 'ask', state: 'PREPARED', released: 0 },
        { at: 'release', state: 'PREPARED', inFlightUntil: iso(T0 + INTENT_IN_FLIGHT_LEASE_MS), released: 1, resolve: 'in-flight' },
      ]);
    });
  });

  describe('stages added by the composition root', () => {
    it('insertAfter adds a stage right after the named one; it runs in that place', async () => {
      const h = harness();
      const phases = executionPhases(h.deps);
      const seen: string[] = [];
      const observe = stage<OutcomeContext, ExecutionOutcome>('observe', async (ctx) => {
        seen.push(`${(await stateOf(h, ctx.decided.tx.businessTransactionId)) ?? 'nothing'} stored, ${h.calls.released.length} released`);
      });
      const execute = insertAfter(phases.execute, 'store the intent', observe);
      expect(execute.map((s) => s.name)).toEqual(['refuse a rejection', 'signed approval', 'hold for an override', 'store the intent', 'observe', 're-check at release', 'release', 'record the release']);
      expect(phases.execute).toHaveLength(7); // the phase it was given is unchanged
      outcomeOf(await new ExecutionService(h.deps, { ...phases, execute }).execute({ caller, tx: txOf() }), 'executed');
      expect(seen).toEqual(['PREPARED stored, 0 released']);
    });

    it('an added stage that returns a value ends the phase with it', async () => {
      const h = harness();
      const phases = executionPhases(h.deps);
      const paused: ExecutionOutcome = { kind: 'failed', error: new DomainError('unavailable', 'paused by the operator') };
      const execute = insertAfter(phases.execute, 'store the intent', stage('pause', async () => paused));
      const tx = txOf();
      expect(await new ExecutionService(h.deps, { ...phases, execute }).execute({ caller, tx })).toBe(paused);
      expect(h.calls.released).toEqual([]);
      expect(await stateOf(h, tx.businessTransactionId)).toBe('PREPARED');

      // A decision stage refuses with a decision of its own.
      const decision = insertAfter(phases.decision, 'duplicate id', stage('closed on Sundays', async () => refusalDecision('CLOSED', 'Closed on Sundays')));
      const { refusal } = outcomeOf(await new ExecutionService(h.deps, { ...phases, decision }).execute({ caller, tx: txOf() }), 'refused');
      expect(refusal).toMatchObject({ matchedRuleId: 'CLOSED', reason: 'Closed on Sundays' });
    });

    it('insertAfter refuses a stage name the phase does not have', () => {
      expect(() => insertAfter(executionPhases(harness().deps).execute, 'no such stage', stage('x', async () => undefined))).toThrow(DomainError);
    });

    it('recordReleaseInTwoSteps: RELEASED first, then FINALIZED; a crash in between is completed by recoverReleased, in one chain', async () => {
      const h = harness();
      const phases = executionPhases(h.deps);
      let crash = false;
      const between: string[] = [];
      const twoSteps = recordReleaseInTwoSteps(h.deps, () => true, async (ctx) => {
        between.push((await stateOf(h, ctx.decided.tx.businessTransactionId))!);
        if (crash) throw new Error('the process died');
      });
      const service = new ExecutionService(h.deps, { ...phases, execute: insertAfter(phases.execute, 'release', twoSteps) });

      const first = outcomeOf(await service.execute({ caller, tx: txOf() }), 'executed');
      expect(between).toEqual(['RELEASED']);
      crash = true;
      const crashed = [txOf(), txOf(), txOf()];
      for (const tx of crashed) await expect(service.execute({ caller, tx })).rejects.toThrow('the process died');
      expect((await h.store.listIntents(['RELEASED'], ALL, 1, 10)).total).toBe(3);

      expect(await new ExecutionService(h.deps).recoverReleased()).toBe(3);
      expect((await h.store.listIntents(['RELEASED'], ALL, 1, 10)).total).toBe(0);
      const records = await Promise.all(crashed.map(async (tx) => (await h.store.getTrustRecord(tx.businessTransactionId, ALL))!));
      // One chain: the first release, then the recovered ones, each linked to the one before.
      const links = [first.record, ...records].map((r) => [r.executions[0]!.previousChainHash, r.executions[0]!.chainHash]);
      for (let i = 1; i < links.length; i++) expect(links[i]![0]).toBe(links[i - 1]![1]);
      expect(h.store.chainHead()).toEqual({ chainHash: links.at(-1)![1], position: 4 });
      expect(await h.service.recoverReleased()).toBe(0);
    });
  });

  describe('the decided transaction', () => {
    it('is plain JSON: it round-trips through JSON.parse(JSON.stringify(...)), an own __proto__ key in metadata included', async () => {
      const h = harness();
      h.behave.grants.push(grantOf({ limits: [{ path: 'intent.parameters.amount', max: 500 }] }));
      const phases = executionPhases(h.deps);
      const decided: DecidedTransaction[] = [];
      const capture = stage<OutcomeContext, ExecutionOutcome>('capture', async (ctx) => void decided.push(ctx.decided));
      const service = new ExecutionService(h.deps, { ...phases, execute: insertAfter(phases.execute, 'refuse a rejection', capture) });
      const metadata = JSON.parse('{"__proto__":{"polluted":true},"tenantId":"t-1"}') as BusinessTransaction['metadata'];
      const tx = txOf({ metadata, policy: policyOf(VERSIONS.grantAndSourced) });

      const { record } = outcomeOf(await service.execute({ caller, tx }), 'executed');

      const [d] = decided;
      expect(d).toMatchObject({ callerId: caller.callerId, decidedAt: iso(T0), connector: 'payments', byRules: true, policy: { name: POLICY, version: VERSIONS.grantAndSourced } });
      expect(d!.assessment.businessValidation.sourcedSignals).toHaveLength(1);
      expect(d!.conditions).toHaveLength(1);
      const copy = JSON.parse(JSON.stringify(d)) as DecidedTransaction;
      expect(copy).toEqual(d);
      expect(Object.keys(copy.tx.metadata)).toEqual(['__proto__', 'tenantId']);
      expect(Object.getPrototypeOf(copy.tx.metadata)).toBe(Object.prototype);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      // And the stored Trust Record keeps the key as it was sent.
      const stored = JSON.parse((await h.store.getTrustRecordText(tx.businessTransactionId, ALL))!) as typeof record;
      expect(Object.keys(stored.transaction.metadata)).toEqual(['__proto__', 'tenantId']);
    });
  });
});

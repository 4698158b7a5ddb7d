import type { PolicyDecision } from '../policy/index.js';
import type { ReleaseCondition } from './connectors.js';
import type { Assessment, BusinessTransaction, PolicyBinding } from './records.js';

/**
 * What the decision phase ends in: plain JSON data, everything the outcome phase needs that was
 * established before the decision. A refusal by business validation is a decision too (`reject`,
 * with `matchedRuleId` saying why).
 */
export interface DecidedTransaction {
  tx: BusinessTransaction;
  callerId: string;
  btxHash: string;
  decidedAt: string;
  policy: PolicyBinding;
  /** The capability namespace of the connector found for the action. */
  connector: string;
  decision: PolicyDecision;
  /** The policy's rules made the decision (false: business validation refused before they ran). */
  byRules: boolean;
  signals: Record<string, unknown>;
  assessment: Omit<Assessment, 'execution'>;
  conditions: ReleaseCondition[];
}

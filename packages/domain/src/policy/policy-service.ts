import { invalid } from '../shared/errors.js';
import { policyNotFound, toInEffectPolicy, type InEffectPolicy, type PolicyStore, type PolicyVersion } from './policy-version.js';
import type { PolicyRef } from './document.js';
import { validatePolicyDocument, type PolicyValidationResult } from './validate.js';

/** Reading published policies: exact versions, the versions in effect, re-validation. */
export class PolicyService {
  constructor(private readonly store: PolicyStore) {}

  /** The published version `ref` names, or 404 `Policy '<name>' version '<version>' was not found.` */
  async get(ref: PolicyRef): Promise<PolicyVersion> {
    const found = await this.store.find(ref);
    if (!found) throw policyNotFound(ref);
    return found;
  }

  async inEffect(): Promise<InEffectPolicy[]> {
    return (await this.store.inEffect()).map(toInEffectPolicy);
  }

  /**
   * `POST /policies/validate` (spec 4.1): 400 when `policyId`, then `policyVersion`, is missing,
   * empty or not a string; 404 when no such version is published; otherwise the published document
   * is validated in full again (schema and CEL types) and the result returned.
   */
  async validate(policyId: unknown, policyVersion: unknown): Promise<PolicyValidationResult> {
    if (typeof policyId !== 'string' || policyId === '') throw invalid('policyId is required.');
    if (typeof policyVersion !== 'string' || policyVersion === '') throw invalid('policyVersion is required.');
    const published = await this.get({ name: policyId, version: policyVersion });
    return validatePolicyDocument(published.content);
  }
}

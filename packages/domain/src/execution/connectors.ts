/**
 * A fact the release depends on (CONTRACT "Egress": the release's signed `conditions`): the
 * endpoint does not act once `validUntil` has passed, and the release expires no later than the
 * earliest of them (spec 4.3.7).
 */
export interface ReleaseCondition {
  signal: string;
  value: unknown;
  validUntil: string;
  source: string;
}

/** What a connector is handed on release: the parameters, bound to the signed intent. */
export interface ReleaseRequest {
  businessTransactionId: string;
  action: string;
  parameters: Record<string, unknown>;
  /** businessTransactionHash of the signed intent: the connector can tie its work to it. */
  intentHash: string;
  /** The facts the decision rested on; an external connector sends them as signed conditions. */
  conditions: ReleaseCondition[];
}

/**
 * Raised by a connector that failed. `before-send`: nothing reached the target, the action was not
 * executed. `conditions-not-met`: a condition no longer held, found before sending or answered by
 * the target, which did not act. `outcome-unknown`: something may have reached it; the result
 * cannot be known.
 */
export class ConnectorError extends Error {
  override readonly name = 'ConnectorError';
  constructor(
    readonly phase: 'before-send' | 'conditions-not-met' | 'outcome-unknown',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface Connector {
  /** The capability namespace it serves (`sandbox` for `sandbox:echo`). */
  readonly namespace: string;
  /** When set, a request for this connector must name this policy (an external registration's `policyName`). */
  readonly policyName?: string;
  release(request: ReleaseRequest): Promise<{ result: unknown }>;
}

export interface ConnectorRegistry {
  /** The connector registered for a capability, if any (built in, or an active external registration). */
  find(action: string): Promise<Connector | undefined>;
}

export const namespaceOf = (action: string): string => action.slice(0, action.indexOf(':'));

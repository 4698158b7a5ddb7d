/** What a connector is handed on release: the parameters, bound to the signed intent. */
export interface ReleaseRequest {
  businessTransactionId: string;
  action: string;
  parameters: Record<string, unknown>;
  /** businessTransactionHash of the signed intent: the connector can tie its work to it. */
  intentHash: string;
}

/**
 * Raised by a connector that failed. `before-send`: nothing reached the target, the action was not
 * executed. `outcome-unknown`: something may have reached it; the result cannot be known.
 */
export class ConnectorError extends Error {
  override readonly name = 'ConnectorError';
  constructor(
    readonly phase: 'before-send' | 'outcome-unknown',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface Connector {
  /** The capability namespace it serves (`sandbox` for `sandbox:echo`). */
  readonly namespace: string;
  release(request: ReleaseRequest): Promise<{ result: unknown }>;
}

export interface ConnectorRegistry {
  /** The connector registered for a capability, if any. */
  find(action: string): Connector | undefined;
}

export const namespaceOf = (action: string): string => action.slice(0, action.indexOf(':'));

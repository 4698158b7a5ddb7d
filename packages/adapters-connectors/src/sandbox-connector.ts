import { ConnectorError, type Connector, type ReleaseRequest } from '@ets/domain';

/**
 * Failure injection through intent parameters, honoured only in sandbox mode, so that tests and
 * demos can drive every intent state:
 * - `sandboxFailure: "before-send"`: fails before anything is sent (the action is not executed);
 * - `sandboxFailure: "after-send"`: fails after sending, so the outcome is unknown;
 * - `sandboxDelayMs: n` (at most 60000): answers after n milliseconds.
 */
export const SANDBOX_FAILURE_PARAMETER = 'sandboxFailure';
export const SANDBOX_DELAY_PARAMETER = 'sandboxDelayMs';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The built-in `sandbox` connector: echoes what it was asked to do. */
export class SandboxConnector implements Connector {
  readonly namespace = 'sandbox';

  constructor(
    private readonly options: {
      failureInjection: boolean;
      /** Sandbox mode: called, synchronously and first, for every release that reaches the connector. */
      journal?: (request: ReleaseRequest) => void;
    },
  ) {}

  async release(request: ReleaseRequest): Promise<{ result: unknown }> {
    this.options.journal?.(request);
    if (this.options.failureInjection) {
      const delay = request.parameters[SANDBOX_DELAY_PARAMETER];
      if (typeof delay === 'number' && Number.isFinite(delay) && delay > 0) await sleep(Math.min(delay, 60_000));
      const failure = request.parameters[SANDBOX_FAILURE_PARAMETER];
      if (failure === 'before-send') throw new ConnectorError('before-send', 'sandbox: injected failure before sending');
      if (failure === 'after-send') throw new ConnectorError('outcome-unknown', 'sandbox: injected failure after sending');
    }
    return {
      result: {
        echo: request.parameters,
        action: request.action,
        businessTransactionId: request.businessTransactionId,
      },
    };
  }
}

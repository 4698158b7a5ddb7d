import { describe, expect, it } from '@jest/globals';
import { ConnectorError } from '@ets/domain';
import { SandboxConnector } from './sandbox-connector.js';

const req = (parameters: Record<string, unknown>) => ({ businessTransactionId: 'id', action: 'sandbox:echo', parameters, intentHash: 'h', conditions: [] });

describe('sandbox connector', () => {
  it('echoes the parameters', async () => {
    const r = await new SandboxConnector({ failureInjection: false }).release(req({ a: 1 }));
    expect(r.result).toEqual({ echo: { a: 1 }, action: 'sandbox:echo', businessTransactionId: 'id' });
  });

  it('injects failures only in sandbox mode', async () => {
    const off = new SandboxConnector({ failureInjection: false });
    await expect(off.release(req({ sandboxFailure: 'before-send' }))).resolves.toBeDefined();
    const on = new SandboxConnector({ failureInjection: true });
    await expect(on.release(req({ sandboxFailure: 'before-send' }))).rejects.toMatchObject({ phase: 'before-send' });
    await expect(on.release(req({ sandboxFailure: 'after-send' }))).rejects.toBeInstanceOf(ConnectorError);
    await expect(on.release(req({ sandboxFailure: 'after-send' }))).rejects.toMatchObject({ phase: 'outcome-unknown' });
  });
});

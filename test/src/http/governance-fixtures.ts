import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { signStepUpPayload } from '@ets/adapters-crypto';
import type { TestKey } from '@ets/test-support';

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

/** A valid policy document of the test policy `gov-test`. */
export function policyDoc(version: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'gov-test',
    policyVersion: version,
    description: `governance tests, version ${version}`,
    signalsSchema: { amount: { type: 'number' }, country: { type: 'string' } },
    rules: [
      { id: 'sanctioned', when: "signals.country in ['KP', 'IR']", action: 'reject', reason: 'Country is sanctioned' },
      { id: 'ok', when: 'signals.amount <= 10000', action: 'approve', reason: 'Within limits' },
    ],
    default: { action: 'reject', reason: 'No rule matched' },
    ...over,
  };
}

/**
 * A POST whose path is sent exactly as written: HTTP clients (and URL parsing) remove `.` and `..`
 * segments, which is what the dot-only checks are about.
 */
export function rawPost(baseUrl: string, path: string, authorization: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const url = new URL(baseUrl);
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path, method: 'POST', headers: { authorization, 'content-type': 'application/json', 'content-length': data.length } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: text ? (JSON.parse(text) as unknown) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

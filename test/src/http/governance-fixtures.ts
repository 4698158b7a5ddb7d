import http from 'node:http';

export { envelope } from '@ets/test-support';

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

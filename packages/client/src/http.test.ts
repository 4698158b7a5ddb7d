import { describe, expect, it } from '@jest/globals';
import { createAttestationClient, createClient } from './http.js';

/** What the typed client sends; the story test (test/src/client) runs it against a started server. */
describe('createClient', () => {
  const recording = () => {
    const requests: Request[] = [];
    const fetch = async (request: Request) => {
      requests.push(request);
      return new Response(JSON.stringify({ status: 'UP' }), { status: 200, headers: { 'content-type': 'application/json' } });
    };
    return { requests, fetch };
  };

  it('sends the key as a bearer credential, JSON bodies, to the base URL', async () => {
    const { requests, fetch } = recording();
    const client = createClient({ baseUrl: 'https://ets.example/', apiKey: 'pk_local_x', headers: { 'x-request-id': 'r-1' }, fetch });
    const { data, error, response } = await client.POST('/verify', { body: { businessTransactionId: 'tx-1' } });
    expect(error).toBeUndefined();
    expect(data).toEqual({ status: 'UP' });
    expect(response.status).toBe(200);
    const [request] = requests;
    expect(request!.url).toBe('https://ets.example/verify');
    expect(request!.method).toBe('POST');
    expect(request!.headers.get('authorization')).toBe('Bearer pk_local_x');
    expect(request!.headers.get('content-type')).toBe('application/json');
    expect(request!.headers.get('x-request-id')).toBe('r-1');
    expect(await request!.json()).toEqual({ businessTransactionId: 'tx-1' });
  });

  it('sends no credential without a key (the public routes), and fills path parameters', async () => {
    const { requests, fetch } = recording();
    await createAttestationClient({ baseUrl: 'http://127.0.0.1:8080', fetch }).GET('/keys/{keyId}', { params: { path: { keyId: 'ed25519-a/b' } } });
    expect(requests[0]!.headers.get('authorization')).toBeNull();
    expect(requests[0]!.url).toBe('http://127.0.0.1:8080/keys/ed25519-a%2Fb');
  });
});

import { DomainError } from '@ets/domain';
import type { RouteModule } from '../route-table.js';

export interface PublishedKeys {
  /** Every key that ever signed anything (rotation keeps old keys published). */
  jwks(): { keys: object[] };
  publicKey(keyId: string): object | undefined;
}

/** Key discovery (spec 4.1): public, sharing the public rate limiter (spec 5.10). */
export const signingKeyRoutes = (keys: PublishedKeys): RouteModule => (t) => {
  t.get('/.well-known/jwks.json', { auth: 'none', limiter: 'public' }, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.json(keys.jwks());
  });
  t.get('/keys/:keyId', { auth: 'none', limiter: 'public' }, (req, res) => {
    const key = keys.publicKey(String(req.params.keyId));
    if (!key) throw new DomainError('not_found', 'Key not found.');
    res.json(key);
  });
};

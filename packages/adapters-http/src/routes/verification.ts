import { checkTransactionId, DomainError, type VerificationService } from '@ets/domain';
import { readScope } from '../middleware/read-scope.js';
import type { RouteModule } from '../route-table.js';
import { idParam } from './id-param.js';

export interface VerificationRoutesDeps {
  service: VerificationService;
}

const bodyField = (body: unknown): unknown =>
  typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>).businessTransactionId : undefined;

/**
 * Verification, receipts and replay (spec 4.1, 7). Inline checks of `businessTransactionId` carry no
 * code (spec 2.1); a missing record on the POST routes is `404 VERIFICATION_FAILED`, on the GET
 * routes a 404 without a code. Another caller's record is missing for a key that does not read
 * every record (the read scope of the caller). The POST routes read, parse and hash a whole Trust
 * Record: they take turns at the record-read gate (read-gate.ts); the GET routes read only the
 * small Verification or Receipt.
 */
export const verificationRoutes = (deps: VerificationRoutesDeps): RouteModule => (t) => {
  t.post('/verify', { auth: 'key', heavyRead: true }, async (req, res) => {
    const id = checkTransactionId(bodyField(req.body));
    // A FAILED verification is a result, not an error: 200 either way.
    res.status(200).json(await deps.service.verify(id, readScope(res)));
  });

  t.post('/receipt', { auth: 'key', heavyRead: true }, async (req, res) => {
    const id = checkTransactionId(bodyField(req.body));
    res.status(201).json(await deps.service.issueReceipt(id, readScope(res)));
  });

  t.post('/replay', { auth: 'key', heavyRead: true }, async (req, res) => {
    // Presence only (spec 4.1): no UUID check; an unknown id is a 404 like any other.
    const id = bodyField(req.body);
    if (typeof id !== 'string' || id === '') throw new DomainError('invalid', 'businessTransactionId is required.');
    res.status(200).json(await deps.service.replay(id.toLowerCase(), readScope(res)));
  });

  t.get('/verification/:id', { auth: 'key' }, async (req, res) => {
    res.json(await deps.service.latestVerification(idParam(req), readScope(res)));
  });

  t.get('/receipt/latest/:id', { auth: 'key' }, async (req, res) => {
    res.json(await deps.service.latestReceipt(idParam(req), readScope(res)));
  });
};

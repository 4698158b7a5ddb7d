import { DomainError } from '../shared/errors.js';
import type { BusinessTransaction } from './records.js';
import { isPlainObject } from '../shared/guards.js';
import { isCapability } from '../shared/names.js';

/**
 * Validation of a Business Transaction (spec 2.2, 7) in the spec's order: a malformed
 * businessTransactionId first, then the five objects, then required strings, then the trust-chain
 * invariants. None of these errors carries a code (spec 2.1).
 */
export const UUID_V1_TO_V5 = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export const INVALID_TRANSACTION_ID = 'businessTransactionId must be a valid UUID.';

const invalid = (message: string) => new DomainError('invalid', message);


const OBJECTS = ['metadata', 'authority', 'authorization', 'intent', 'policy'] as const;

const REQUIRED_STRINGS: readonly [(typeof OBJECTS)[number], string][] = [
  ['authority', 'principalId'],
  ['authority', 'authorityId'],
  ['authorization', 'authorityId'],
  ['intent', 'action'],
  ['policy', 'name'],
  ['policy', 'version'],
];

/** Checks the id alone (shared by /verify and /receipt). */
export function checkTransactionId(id: unknown): string {
  if (id === undefined || id === null) throw invalid('businessTransactionId is required.');
  if (typeof id !== 'string' || !UUID_V1_TO_V5.test(id)) throw invalid(INVALID_TRANSACTION_ID);
  return id.toLowerCase();
}

export function parseBusinessTransaction(body: unknown): BusinessTransaction {
  if (!isPlainObject(body)) throw invalid('Request body must be a JSON object (a Business Transaction).');
  const businessTransactionId = checkTransactionId(body.businessTransactionId);

  for (const name of OBJECTS) {
    if (!isPlainObject(body[name])) throw invalid(`${name} is required and must be an object.`);
  }
  const obj = (name: (typeof OBJECTS)[number]) => body[name] as Record<string, unknown>;
  for (const [o, field] of REQUIRED_STRINGS) {
    if (typeof obj(o)[field] !== 'string') throw invalid(`${o}.${field} is required and must be a string.`);
  }
  const metadata = obj('metadata');
  if (metadata.tenantId !== undefined && typeof metadata.tenantId !== 'string') throw invalid('metadata.tenantId must be a string.');
  const intent = obj('intent');
  if (intent.parameters !== undefined && !isPlainObject(intent.parameters)) throw invalid('intent.parameters must be an object.');
  if (body.signals !== undefined && !isPlainObject(body.signals)) throw invalid('signals must be an object.');

  // Trust-chain invariants.
  const authority = obj('authority');
  const authorization = obj('authorization');
  if (authorization.authorityId !== authority.authorityId) throw invalid('authorization.authorityId must match authority.authorityId.');
  if (authorization.principalId !== undefined && authorization.principalId !== authority.principalId) {
    throw invalid('authorization.principalId must match authority.principalId.');
  }
  if (authorization.businessTransactionId !== undefined && authorization.businessTransactionId !== body.businessTransactionId) {
    throw invalid('authorization.businessTransactionId must match businessTransactionId.');
  }
  if (authorization.action !== undefined && authorization.action !== intent.action) {
    throw invalid('authorization.action must match intent.action.');
  }
  if (!isCapability(intent.action)) {
    throw invalid('intent.action must be a capability of the form namespace:verb.');
  }

  return {
    businessTransactionId,
    metadata: metadata as BusinessTransaction['metadata'],
    authority: authority as BusinessTransaction['authority'],
    authorization: authorization as BusinessTransaction['authorization'],
    intent: { ...intent, parameters: (intent.parameters as Record<string, unknown> | undefined) ?? {} } as BusinessTransaction['intent'],
    policy: obj('policy') as BusinessTransaction['policy'],
    signals: (body.signals as Record<string, unknown> | undefined) ?? {},
  };
}

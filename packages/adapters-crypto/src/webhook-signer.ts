import { createHmac } from 'node:crypto';
import type { WebhookSigner } from '@ets/domain';

/** Standard Webhooks: a secret is `whsec_` and the base64 of its bytes; 24 to 64 bytes (the spec's range). */
export const WEBHOOK_SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The secret's key bytes, or why it is not a secret (never quoting it). */
export function readWebhookSecret(secret: string): { ok: true; key: Buffer } | { ok: false; problem: string } {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) return { ok: false, problem: `it must start with ${WEBHOOK_SECRET_PREFIX}` };
  const encoded = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  if (!BASE64.test(encoded)) return { ok: false, problem: `what follows ${WEBHOOK_SECRET_PREFIX} must be standard base64` };
  const key = Buffer.from(encoded, 'base64');
  if (key.length < 24 || key.length > 64) return { ok: false, problem: `it must hold 24 to 64 bytes (it holds ${key.length})` };
  return { ok: true, key };
}

/**
 * Signs a webhook as Standard Webhooks says: `v1,<base64 HMAC-SHA256 over "<id>.<timestamp>.<body>">`
 * keyed with the secret's bytes. The secret lives only in this object (never logged, never shown).
 */
export class StandardWebhookSigner implements WebhookSigner {
  readonly #key: Buffer;

  constructor(secret: string) {
    const read = readWebhookSecret(secret);
    if (!read.ok) throw new Error(`not a webhook secret: ${read.problem}`);
    this.#key = read.key;
  }

  sign(messageId: string, timestamp: number, body: string): string {
    return `v1,${createHmac('sha256', this.#key).update(`${messageId}.${timestamp}.${body}`, 'utf8').digest('base64')}`;
  }

  toJSON(): string {
    return '[StandardWebhookSigner]';
  }
}

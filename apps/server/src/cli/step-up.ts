import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { signStepUpPayload } from '@ets/adapters-crypto';
import { charLength, REASON_MAX_LENGTH, STEP_UP_MAX_VALIDITY_MS } from '@ets/domain';
import { CliError, codeOrMessage } from './errors.js';
import { usageOf } from './usage.js';

const USAGE = usageOf('step-up sign');
export const DEFAULT_STEP_UP_TTL_SECONDS = 300;
/** The server refuses an envelope that expires further ahead than this. */
const MAX_TTL_SECONDS = STEP_UP_MAX_VALIDITY_MS / 1000;

/**
 * `ets step-up sign` (CONTRACT "Governance"): prints a step-up envelope, and nothing else, on
 * stdout: the body of `POST …/pending-changes/{id}/approve` or `…/reject`. The payload is signed
 * with the checker's own Ed25519 step-up private key (never the bearer key); the nonce is 32
 * random bytes, and the envelope expires `--ttl` seconds from now.
 */
export async function stepUpCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== 'sign') throw new CliError(USAGE, 2);
  const { values } = parseArgs({
    args: rest,
    options: {
      key: { type: 'string' },
      change: { type: 'string' },
      action: { type: 'string' },
      reason: { type: 'string' },
      ttl: { type: 'string' },
      'caller-id': { type: 'string' },
    },
    strict: true,
  });
  if (!values.key) throw new CliError(`--key is required (the Ed25519 step-up private key, PEM). ${USAGE}`, 2);
  const change = values.change?.trim();
  if (!change) throw new CliError(`--change is required (the id of the pending change). ${USAGE}`, 2);
  const action = values.action;
  if (action !== 'approve' && action !== 'reject') throw new CliError(`--action must be approve or reject. ${USAGE}`, 2);
  const reason = values.reason;
  if (action === 'reject' && (reason === undefined || reason.trim() === '')) {
    throw new CliError('--action reject needs --reason TEXT: the reason is recorded as the rejection reason.', 2);
  }
  if (reason !== undefined && charLength(reason) > REASON_MAX_LENGTH) throw new CliError(`--reason must be at most ${REASON_MAX_LENGTH} characters.`, 2);
  const ttlText = values.ttl ?? String(DEFAULT_STEP_UP_TTL_SECONDS);
  if (!/^\d+$/.test(ttlText) || Number(ttlText) < 1 || Number(ttlText) > MAX_TTL_SECONDS) {
    throw new CliError(`--ttl must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}.`, 2);
  }
  const callerId = values['caller-id'];
  if (callerId !== undefined && callerId.trim() === '') throw new CliError('--caller-id must not be empty.', 2);

  let pem: string;
  try {
    pem = readFileSync(values.key, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read the step-up key ${values.key}: ${codeOrMessage(e)}`);
  }
  let envelope: StepUpEnvelope;
  try {
    envelope = stepUpEnvelope(pem, { change, action, ttlSeconds: Number(ttlText), callerId, reason });
  } catch (e) {
    throw new CliError(`${(e as Error).message} (${values.key}).`);
  }
  process.stdout.write(JSON.stringify(envelope) + '\n');
}

export interface StepUpEnvelope {
  payload: Record<string, unknown>;
  signature: string;
}

/**
 * A step-up envelope, signed with `privateKeyPem` (the checker's Ed25519 step-up key): what
 * `ets step-up sign` prints, and what `ets demo` and `ets quickstart` post as their approvers.
 * Throws when the key is not an Ed25519 private key.
 */
export function stepUpEnvelope(
  privateKeyPem: string,
  o: { change: string; action: 'approve' | 'reject'; ttlSeconds?: number; callerId?: string; reason?: string },
): StepUpEnvelope {
  const payload = {
    pendingPolicyChangeId: o.change,
    action: o.action,
    expiresAt: new Date(Date.now() + (o.ttlSeconds ?? DEFAULT_STEP_UP_TTL_SECONDS) * 1000).toISOString(),
    nonce: randomBytes(32).toString('base64url'),
    ...(o.callerId !== undefined ? { callerId: o.callerId } : {}),
    ...(o.reason !== undefined ? { reason: o.reason } : {}),
  };
  return { payload, signature: signStepUpPayload(privateKeyPem, payload) };
}

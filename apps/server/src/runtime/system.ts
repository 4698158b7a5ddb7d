import { randomBytes, randomUUID } from 'node:crypto';
import type { Clock, IdGenerator, NonceGenerator } from '@ets/domain';

export const systemClock: Clock = { now: () => new Date() };
export const randomIds: IdGenerator = { uuid: () => randomUUID() };
/** 32 random bytes, base64url: the nonces of source questions and sandbox approvals. */
export const randomNonces: NonceGenerator = { nonce: () => randomBytes(32).toString('base64url') };

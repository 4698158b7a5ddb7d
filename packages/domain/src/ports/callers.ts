import type { Caller } from '../identity/caller.js';

/** The step-up keys of the callers who may approve: USER keys with a registered step-up key. */
export interface ApproverDirectory {
  /** The step-up public keys (PEM) of `callerId`, if it is a USER key with one; else none. */
  stepUpKeysOf(callerId: string): readonly string[];
}

/** Resolves a presented bearer key to its caller, or undefined for an unknown key. */
export interface CallerDirectory {
  authenticate(rawKey: string): Caller | undefined;
}

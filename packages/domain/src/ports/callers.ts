import type { Caller } from '../identity/caller.js';

/** Resolves a presented bearer key to its caller, or undefined for an unknown key. */
export interface CallerDirectory {
  authenticate(rawKey: string): Caller | undefined;
}

/** Time is a port so expiry, validUntil and nonce logic is testable without sleeping. */
export interface Clock {
  now(): Date;
}

/** Randomness is a port for the same reason: tests pin ids. */
export interface IdGenerator {
  /** A random (v4) UUID. */
  uuid(): string;
}

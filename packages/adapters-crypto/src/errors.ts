/** The signing keys on disk cannot be used as they are; the service must not start. */
export class KeyRingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Key files that the metadata or the signing mode requires are not there. */
export class KeyFilesMissingError extends KeyRingError {
  constructor(
    message: string,
    readonly missingFiles: readonly string[],
  ) {
    super(message);
  }
}

/**
 * Hybrid mode was asked for, but the data dir holds Ed25519 keys without a usable ML-DSA-65 key.
 * Generating one silently would hide a lost key file, so the service refuses to start.
 */
export class HybridKeyMissingError extends KeyFilesMissingError {}

/** A failure the operator must read: printed as one line by the CLI, with this exit code. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

/** A failure the operator must read: printed as one line by the CLI, with this exit code. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

/** An I/O error in a word: its code (ENOENT, EACCES, EADDRINUSE, …), else its message. */
export const codeOrMessage = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/** Why a `fetch` failed: the code of its cause (ECONNREFUSED, ENOTFOUND, …), else the error's name (a timeout). */
export const fetchProblem = (e: unknown): string => (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;

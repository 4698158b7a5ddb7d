export interface Periodic {
  /** Stops the schedule and waits for the round under way. */
  stop(): Promise<void>;
}

/**
 * Runs `round` every `everyMs` in the background, one round at a time (a tick that finds the last
 * round still running is skipped), never on a request's path. `round` handles its own failures; a
 * round that loops (through a backlog) asks `stopping()` between its steps.
 */
export function every(everyMs: number, round: (stopping: () => boolean) => Promise<void>): Periodic {
  let running: Promise<void> | undefined;
  let stopped = false;
  const timer = setInterval(() => {
    if (stopped || running) return;
    running = round(() => stopped).finally(() => (running = undefined));
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}

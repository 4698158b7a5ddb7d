import type { CheckpointPublisher, Logger } from '@ets/domain';

export interface CheckpointSchedule {
  /** Stops the schedule and waits for a checkpoint being made. */
  stop(): Promise<void>;
}

/** A failure is logged once, then again only when it changes or a minute later (a refused log stays refused). */
const REPEAT_LOG_MS = 60_000;

/**
 * Publishes the transparency log's checkpoints: one at start (so `GET /log/checkpoint` answers at
 * once), then every `everyMs` when the tree has grown (the publisher never signs more often than
 * once a second, and not at all when nothing was appended).
 */
export async function scheduleCheckpoints(publisher: CheckpointPublisher, logger: Logger, everyMs = 1000): Promise<CheckpointSchedule> {
  let lastProblem: { message: string; at: number } | undefined;
  const tick = async (): Promise<void> => {
    try {
      const checkpoint = await publisher.publish();
      if (lastProblem) logger.info({ treeSize: checkpoint.treeSize }, 'transparency log checkpoints are signed again');
      lastProblem = undefined;
    } catch (e) {
      const message = (e as Error).message;
      const cause = (e as { cause?: Error }).cause;
      if (lastProblem?.message !== message || Date.now() - lastProblem.at > REPEAT_LOG_MS) {
        logger.error({ err: { message, cause: cause?.message } }, 'transparency log: no checkpoint could be signed');
        lastProblem = { message, at: Date.now() };
      }
    }
  };
  await tick();
  let stopped = false;
  const timer = setInterval(() => {
    if (!stopped) void tick();
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await publisher.idle();
    },
  };
}

import type { DeliveryReport, Logger, NoticeDelivery } from '@ets/domain';

export interface NoticeSchedule {
  /** Stops polling and waits for the deliveries under way (each ends within the webhook timeout). */
  stop(): Promise<void>;
}

/**
 * The background worker of notifications: every `everyMs` it delivers the notices that are due
 * (NoticeDelivery), one round at a time. Never on a request's path: a slow or failing receiver
 * delays nothing but its own notices. Logs name the endpoint's host only (a webhook URL's path may
 * be a credential) and never the secret.
 */
export function scheduleNoticeDelivery(delivery: Pick<NoticeDelivery, 'deliverDue'>, logger: Logger, everyMs = 1000): NoticeSchedule {
  let running: Promise<void> | undefined;
  let stopped = false;
  const report = (r: DeliveryReport) => {
    const fields = { messageId: r.messageId, host: r.host, attempts: r.attempts };
    if (r.outcome === 'delivered') logger.info(fields, 'notification delivered');
    else if (r.outcome === 'retry') logger.warn({ ...fields, error: r.error, nextAttemptAt: r.nextAttemptAt }, 'notification not delivered; it will be tried again');
    else logger.error({ ...fields, error: r.error }, 'notification given up after its last attempt');
  };
  const round = async (): Promise<void> => {
    try {
      // More than one batch may be due (a backlog after an outage): rounds follow each other until it is gone.
      for (let reports = await delivery.deliverDue(); ; reports = await delivery.deliverDue()) {
        reports.forEach(report);
        if (reports.length === 0 || stopped) return;
      }
    } catch (e) {
      logger.error({ err: { message: (e as Error).message } }, 'notifications: the outbox could not be read or updated');
    }
  };
  const timer = setInterval(() => {
    if (stopped || running) return;
    running = round().finally(() => (running = undefined));
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

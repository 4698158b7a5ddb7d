import type { DeliveryReport, Logger, NoticeDelivery } from '@ets/domain';
import { every, type Periodic } from './periodic.js';

/** `stop` stops polling and waits for the deliveries under way (each ends within the webhook timeout). */
export type NoticeSchedule = Periodic;

/**
 * The background worker of notifications: every `everyMs` it delivers the notices that are due
 * (NoticeDelivery), one round at a time. Never on a request's path: a slow or failing receiver
 * delays nothing but its own notices. Logs name the endpoint's host only (a webhook URL's path may
 * be a credential) and never the secret.
 */
export function scheduleNoticeDelivery(delivery: Pick<NoticeDelivery, 'deliverDue'>, logger: Logger, everyMs = 1000): NoticeSchedule {
  const report = (r: DeliveryReport) => {
    const fields = { messageId: r.messageId, host: r.host, attempts: r.attempts };
    if (r.outcome === 'delivered') logger.info(fields, 'notification delivered');
    else if (r.outcome === 'retry') logger.warn({ ...fields, error: r.error, nextAttemptAt: r.nextAttemptAt }, 'notification not delivered; it will be tried again');
    else logger.error({ ...fields, error: r.error }, 'notification given up after its last attempt');
  };
  const round = async (stopping: () => boolean): Promise<void> => {
    try {
      // More than one batch may be due (a backlog after an outage): rounds follow each other until it is gone.
      for (let reports = await delivery.deliverDue(); ; reports = await delivery.deliverDue()) {
        reports.forEach(report);
        if (reports.length === 0 || stopping()) return;
      }
    } catch (e) {
      logger.error({ err: { message: (e as Error).message } }, 'notifications: the outbox could not be read or updated');
    }
  };
  return every(everyMs, round);
}

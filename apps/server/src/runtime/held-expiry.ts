import type { HeldTransactions, Logger } from '@ets/domain';
import { every, type Periodic } from './periodic.js';

/**
 * Silence is never consent: every `everyMs`, each held transaction whose time has run out is
 * refused by expiry (a signed Refusal Record, `override-expired`). Every instance sweeps; the
 * store's compare-and-set refuses each one once.
 */
export function scheduleHeldExpiry(held: Pick<HeldTransactions, 'expireDue'>, logger: Logger, everyMs = 1000): Periodic {
  return every(everyMs, async (stopping) => {
    try {
      for (let n = await held.expireDue(); n > 0 && !stopping(); n = await held.expireDue()) logger.info({ expired: n }, 'held transactions refused by expiry');
    } catch (e) {
      logger.error({ err: { message: (e as Error).message } }, 'held transactions: the expiry sweep failed; it is tried again');
    }
  });
}

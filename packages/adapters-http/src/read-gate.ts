import type { RequestHandler } from 'express';
import { callerOf } from './middleware/authenticate.js';

/** How many heavy reads a process serves at once, in all and per caller. */
export interface ReadGateLimits {
  concurrent: number;
  perCaller: number;
}

/**
 * At most 4 requests that read whole Trust Records (to send them, or to verify, replay, prove or
 * sign a Receipt over one) run at once per process, at most 2 of them for one caller; the others
 * wait their turn, the callers taking turns. Together with the stored-text streaming of the routes
 * (a few records in memory per response), this bounds what such requests can cost the process
 * (memory, CPU, storage connections), whatever the records' size and however many requests one
 * caller sends, so that /health and other callers are still answered.
 */
export const RECORD_READ_LIMITS: ReadGateLimits = { concurrent: 4, perCaller: 2 };

/** Lets a waiting request in. */
type Waiter = () => void;

/**
 * A fair admission gate: `limits.concurrent` holders at once, at most `limits.perCaller` of one
 * caller; a freed place goes to the waiting caller that holds the fewest places, among equals the
 * one let in longest ago (round robin), each caller's own requests in arrival order. One caller
 * sending many requests therefore waits behind itself, never in front of the others.
 */
export class ReadGate {
  private active = 0;
  private readonly activeBy = new Map<string, number>();
  /** Waiters per caller, each caller's in arrival order. */
  private readonly waiting = new Map<string, Waiter[]>();
  /** When each caller was last let in (a counter), for the turns. */
  private readonly lastServed = new Map<string, number>();
  private served = 0;

  constructor(readonly limits: ReadGateLimits = RECORD_READ_LIMITS) {}

  /** What is being served and what waits, for tests and diagnostics. */
  stats(): { active: number; waiting: number; activeByCaller: Record<string, number> } {
    let waiting = 0;
    for (const q of this.waiting.values()) waiting += q.length;
    return { active: this.active, waiting, activeByCaller: Object.fromEntries(this.activeBy) };
  }

  /**
   * Calls `start(leave)` once the caller may go (at once when there is room); `leave` gives the
   * place back (once). Returns `cancel`, which drops a request still waiting (a no-op once started).
   */
  enter(callerId: string, start: (leave: () => void) => void): () => void {
    let state: 'waiting' | 'started' | 'done' = 'waiting';
    const leave = () => {
      if (state !== 'started') return;
      state = 'done';
      this.active--;
      const n = (this.activeBy.get(callerId) ?? 1) - 1;
      if (n === 0) this.activeBy.delete(callerId);
      else this.activeBy.set(callerId, n);
      this.admit();
    };
    const waiter: Waiter = () => {
      state = 'started';
      this.active++;
      this.activeBy.set(callerId, (this.activeBy.get(callerId) ?? 0) + 1);
      this.lastServed.set(callerId, ++this.served);
      start(leave);
    };
    const queue = this.waiting.get(callerId);
    if (queue) queue.push(waiter);
    else this.waiting.set(callerId, [waiter]);
    this.admit();
    return () => {
      if (state !== 'waiting') return;
      state = 'done';
      const q = this.waiting.get(callerId)!;
      q.splice(q.indexOf(waiter), 1);
      if (q.length === 0) this.waiting.delete(callerId);
    };
  }

  private admit(): void {
    while (this.active < this.limits.concurrent) {
      const callerId = this.nextTurn();
      if (callerId === undefined) return;
      const queue = this.waiting.get(callerId)!;
      const next = queue.shift()!;
      if (queue.length === 0) this.waiting.delete(callerId);
      next();
    }
  }

  /** The waiting caller (under its own limit) that holds the fewest places, the one let in longest ago among equals. */
  private nextTurn(): string | undefined {
    let best: { callerId: string; active: number; lastServed: number } | undefined;
    for (const callerId of this.waiting.keys()) {
      const active = this.activeBy.get(callerId) ?? 0;
      const lastServed = this.lastServed.get(callerId) ?? 0;
      if (active >= this.limits.perCaller) continue;
      if (!best || active < best.active || (active === best.active && lastServed < best.lastServed)) best = { callerId, active, lastServed };
    }
    return best?.callerId;
  }
}

/**
 * The gate as a route's middleware (after authentication: the caller is known). The place is held
 * until the response is finished or its connection closes; a request whose client leaves while
 * waiting gives up its turn.
 *
 * An admitted request goes on at the next turn of the event loop, never at once: a place is freed
 * as a response ends (in a process tick), and on a store that answers synchronously (SQLite) the
 * next request would otherwise run in that tick too, and the next after it, the whole queue without
 * the process ever reading another connection: /health would wait for all of them.
 */
export function gatedBy(gate: ReadGate): RequestHandler {
  return (_req, res, next) => {
    let closed = false;
    const cancel = gate.enter(callerOf(res).callerId, (leave) => {
      res.once('close', leave);
      setImmediate(() => {
        if (!closed) next();
      });
    });
    res.once('close', () => {
      closed = true;
      cancel();
    });
  };
}

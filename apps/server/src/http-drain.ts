import { Server as NetServer, type Socket } from 'node:net';
import type { Server } from 'node:http';
import type { HttpApp } from '@ets/adapters-http';
import type { Logger } from '@ets/domain';

/**
 * A connection idle for this long is closed at shutdown. One idle for less may be carrying a
 * client's next request right now: closing it would cut that request off without an answer, so it
 * gets this long to arrive (and is answered with `Connection: close`).
 */
export const IDLE_GRACE_MS = 1000;
const SWEEP_MS = 50;

/** Which connections are open and whether each is between requests (and since when). */
export class ConnectionTracker {
  private readonly sockets = new Map<Socket, { active: number; idleSince: number }>();

  constructor(server: Server) {
    server.on('connection', (socket: Socket) => {
      this.sockets.set(socket, { active: 0, idleSince: Date.now() });
      socket.once('close', () => this.sockets.delete(socket));
    });
    server.on('request', (req: { socket: Socket }, res: { once(e: 'close', f: () => void): void }) => {
      const state = this.sockets.get(req.socket);
      if (!state) return;
      state.active++;
      res.once('close', () => {
        state.active--;
        state.idleSince = Date.now();
      });
    });
  }

  get open(): number {
    return this.sockets.size;
  }

  /** Closes the connections that have had no request for at least `ms`. */
  closeIdle(ms: number): void {
    const now = Date.now();
    for (const [socket, state] of this.sockets) if (state.active === 0 && now - state.idleSince >= ms) socket.destroy();
  }
}

/**
 * Graceful shutdown of the HTTP side, so that no request is cut off without an answer and the
 * pipeline of every request that started finishes before the database closes:
 *
 * 1. stop accepting connections (the listener closes; new connections are refused, so their
 *    requests were never sent);
 * 2. keep answering requests that arrive on open connections, every answer with `Connection:
 *    close`, so that the client sends nothing more on it;
 * 3. close connections once they have been idle for IDLE_GRACE_MS;
 * 4. after `timeoutMs` (SVC_SHUTDOWN_TIMEOUT_MS), close whatever is still open;
 * 5. wait for the route handlers still running (one whose client went away goes on: its intent
 *    must not be left PREPARED by a database closed under it), up to `timeoutMs` again.
 */
export async function drainHttp(server: Server, connections: ConnectionTracker, http: HttpApp, timeoutMs: number, logger: Logger): Promise<void> {
  http.closeConnectionsAfterAnswers();
  // net.Server's close: http.Server's own would also close every idle keep-alive connection at once.
  const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
  connections.closeIdle(IDLE_GRACE_MS);
  const sweep = setInterval(() => connections.closeIdle(IDLE_GRACE_MS), SWEEP_MS);
  try {
    if (!(await within(closed, timeoutMs))) {
      logger.warn({ connections: connections.open, inFlight: http.inFlight() }, 'shutdown timeout: closing the connections still open');
      server.closeAllConnections();
      await closed;
    }
  } finally {
    clearInterval(sweep);
  }
  // Clears http.Server's own timers (the listener is already closed).
  server.close(() => undefined);
  if (!(await within(http.idle(), timeoutMs))) {
    logger.error({ inFlight: http.inFlight() }, 'requests still running after the shutdown timeout; closing the database under them');
  }
}

/** Whether `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

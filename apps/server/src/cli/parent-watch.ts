const PARENT_CHECK_MS = 1000;

/**
 * Calls `stop` once the process that started this one has exited. A command that serves until
 * stopped is often started through a wrapper (`npm start`, `npx ets …`): stopping the wrapper
 * stops it too, instead of leaving it running, orphaned, with its port. When the parent exits
 * the process is re-parented, which is what this watches for.
 */
export function stopWhenParentExits(stop: () => void): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, PARENT_CHECK_MS).unref();
}

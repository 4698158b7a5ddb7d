/**
 * When the console asks the service again by itself (the inbox, an item that waits). Each read is
 * an authenticated (so audited and logged) request: not more often than every REFRESH_MS, not
 * while the tab is hidden, and not once the person has been away for longer than a session's idle
 * expiry allows, so an unattended console still signs itself out.
 */
export const REFRESH_MS = 15_000;
const AWAY_AFTER_MS = 25 * 60_000;

let lastInput = Date.now();
for (const event of ['pointerdown', 'keydown', 'wheel', 'focus']) addEventListener(event, () => (lastInput = Date.now()), { capture: true, passive: true });

/** Someone is looking: the tab is visible and was used recently. */
export const attended = (): boolean => document.visibilityState === 'visible' && Date.now() - lastInput < AWAY_AFTER_MS;

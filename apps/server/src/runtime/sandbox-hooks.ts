import type { BusinessTransaction, ExecutionHooks } from '@ets/domain';

/** Intent parameter that pauses the pipeline after RELEASED is stored and before the record (sandbox mode only). */
export const SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER = 'sandboxPauseAfterReleaseMs';
/** Intent parameter that holds the release after the intent is stored (sandbox mode only; CONTRACT "Re-check at release"). */
export const SANDBOX_PAUSE_BEFORE_RELEASE_PARAMETER = 'sandboxPauseBeforeReleaseMs';

const pauseFor = async (tx: BusinessTransaction, parameter: string): Promise<void> => {
  const ms = tx.intent.parameters[parameter];
  if (typeof ms === 'number' && Number.isFinite(ms) && ms > 0) await new Promise((r) => setTimeout(r, Math.min(ms, 60_000)));
};

/**
 * Sandbox mode lets tests act between the pipeline's durable steps: a pause after release gives a
 * crash test the moment to SIGKILL a server whose intent is RELEASED and whose Trust Record does
 * not exist yet; a pause before release, the moment to change what the release depends on (revoke
 * a registration, change a DNS answer) after the intent is stored.
 */
export function sandboxPipelineHooks(): ExecutionHooks {
  return {
    beforeRelease: (tx) => pauseFor(tx, SANDBOX_PAUSE_BEFORE_RELEASE_PARAMETER),
    splitRelease: (tx) => typeof tx.intent.parameters[SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER] === 'number',
    afterRelease: (tx) => pauseFor(tx, SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER),
  };
}

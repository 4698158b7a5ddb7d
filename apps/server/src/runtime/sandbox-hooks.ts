import type { ExecutionHooks } from '@ets/domain';

/** Intent parameter that pauses the pipeline after RELEASED is stored and before the record (sandbox mode only). */
export const SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER = 'sandboxPauseAfterReleaseMs';

/**
 * Sandbox mode lets crash tests stop the process between the pipeline's durable steps: a pause
 * after release gives a test the moment to SIGKILL a server whose intent is RELEASED and whose
 * Trust Record does not exist yet.
 */
export function sandboxPipelineHooks(): ExecutionHooks {
  return {
    async afterRelease(tx) {
      const ms = tx.intent.parameters[SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER];
      if (typeof ms === 'number' && Number.isFinite(ms) && ms > 0) await new Promise((r) => setTimeout(r, Math.min(ms, 60_000)));
    },
  };
}

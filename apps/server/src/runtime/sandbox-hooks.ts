import { insertAfter, recordReleaseInTwoSteps, STORE_THE_INTENT, stage, type ExecutionDeps, type ExecutionPhases, type OutcomeContext, type OutcomeStage } from '@ets/domain';

/** Intent parameter that pauses the pipeline after RELEASED is stored and before the record (sandbox mode only). */
export const SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER = 'sandboxPauseAfterReleaseMs';
/** Intent parameter that holds the release after the intent is stored (sandbox mode only; CONTRACT "Re-check at release"). */
export const SANDBOX_PAUSE_BEFORE_RELEASE_PARAMETER = 'sandboxPauseBeforeReleaseMs';

const parameterOf = (ctx: OutcomeContext, parameter: string) => ctx.decided.tx.intent.parameters[parameter];

const pauseFor = async (ctx: OutcomeContext, parameter: string): Promise<void> => {
  const ms = parameterOf(ctx, parameter);
  if (typeof ms === 'number' && Number.isFinite(ms) && ms > 0) await new Promise((r) => setTimeout(r, Math.min(ms, 60_000)));
};

/**
 * Sandbox mode lets tests act between the pipeline's durable steps, as stages of its own in the
 * execute phase: a pause after the intent is stored and before release, the moment to change what
 * the release depends on (revoke a registration, change a DNS answer); and, for a request that asks
 * for a pause after release, the release recorded in two commits with the pause in between, the
 * moment for a crash test to SIGKILL a server whose intent is RELEASED and whose Trust Record does
 * not exist yet.
 */
export function withSandboxStages(d: ExecutionDeps, phases: ExecutionPhases): ExecutionPhases {
  const pauseBeforeRelease: OutcomeStage = stage('sandbox: pause before release', (ctx) => pauseFor(ctx, SANDBOX_PAUSE_BEFORE_RELEASE_PARAMETER));
  const inTwoSteps = recordReleaseInTwoSteps(
    d,
    (ctx) => typeof parameterOf(ctx, SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER) === 'number',
    (ctx) => pauseFor(ctx, SANDBOX_PAUSE_AFTER_RELEASE_PARAMETER),
  );
  const withPauses = (phase: readonly OutcomeStage[]) => insertAfter(insertAfter(phase, STORE_THE_INTENT, pauseBeforeRelease), 'release', inTwoSteps);
  return { ...phases, execute: withPauses(phases.execute), releaseHeld: withPauses(phases.releaseHeld) };
}

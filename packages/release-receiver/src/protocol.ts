import { unmetConditions, type ReleaseCondition, type ReleaseVerifier, type VerifiedRelease } from './verify-release.js';

/** An answer in the release protocol (CONTRACT "Egress"): an HTTP status and a JSON body. */
export interface ProtocolAnswer {
  status: number;
  body: { status: 'executed'; result: unknown } | { status: 'conditionsNotMet'; reason: string } | { status: 'refused'; reason: string };
}

/** The action was done: 200 `{status: "executed", result}`. */
export const executed = (result: unknown): ProtocolAnswer => ({ status: 200, body: { status: 'executed', result: result ?? null } });

/** A condition no longer holds and nothing was done: 200 `{status: "conditionsNotMet", reason}`. */
export const conditionsNotMet = (reason: string): ProtocolAnswer => ({ status: 200, body: { status: 'conditionsNotMet', reason } });

export interface HandleReleaseOptions {
  /** The owner's own check of a condition's fact (beside its `validUntil`). */
  checkCondition?: (condition: ReleaseCondition) => boolean | Promise<boolean>;
  now?: () => Date;
}

/**
 * One request of the protocol: `body` is the parsed JSON the service posted (`{"release": …}`).
 * A release that does not verify is refused (401; 409 when already received) and nothing is done;
 * the service then records the outcome as unknown, for a human to reconcile. A condition that no
 * longer holds is `conditionsNotMet`. Otherwise `act` runs once and its result is `executed`.
 */
export async function handleRelease(
  body: unknown,
  verifier: ReleaseVerifier,
  act: (release: VerifiedRelease) => Promise<unknown>,
  options: HandleReleaseOptions = {},
): Promise<ProtocolAnswer & { release?: VerifiedRelease }> {
  const token = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>).release : undefined;
  const verdict = await verifier.verify(token);
  if (!verdict.ok) return { status: verdict.reason === 'replayed' ? 409 : 401, body: { status: 'refused', reason: verdict.message } };
  const unmet = await unmetConditions(verdict.release, { now: options.now, check: options.checkCondition });
  if (unmet.length > 0) {
    return { ...conditionsNotMet(`no longer holds: ${unmet.map((c) => `${c.signal} (valid until ${c.validUntil})`).join(', ')}`), release: verdict.release };
  }
  return { ...executed(await act(verdict.release)), release: verdict.release };
}

/**
 * The stage kernel: a pipeline is a list of named stages run in order over one context, until a
 * stage returns a value. It knows no stage and no feature; the phases of the execution pipeline
 * (execution-service.ts) and the doors that reuse them are built on it.
 */
import { DomainError } from '../shared/errors.js';

/** A named step. It ends its phase by returning a value (an outcome, a decision), or passes by returning nothing. */
export interface Stage<C, R> {
  readonly name: string;
  run(ctx: C): Promise<R | void>;
}

/** A stage; its context and value types come from where it is used (a DecisionStage, an OutcomeStage). */
export const stage = <C, R>(name: string, run: NoInfer<Stage<C, R>['run']>): Stage<C, R> => ({ name, run });

/** Runs the stages in order until one returns a value; undefined when none does. */
export async function runStages<C, R>(stages: readonly Stage<C, R>[], ctx: C): Promise<R | undefined> {
  for (const s of stages) {
    const value = await s.run(ctx);
    if (value !== undefined) return value;
  }
  return undefined;
}

/**
 * `stages` with `added` inserted right after the stage named `after` (the composition root adds
 * stages of its own, such as sandbox mode's pauses, without the domain branching on them).
 */
export function insertAfter<C, R>(stages: readonly Stage<C, R>[], after: string, ...added: Stage<C, R>[]): Stage<C, R>[] {
  const at = stages.findIndex((s) => s.name === after);
  if (at === -1) throw new DomainError('internal', `The pipeline has no stage '${after}'.`);
  return [...stages.slice(0, at + 1), ...added, ...stages.slice(at + 1)];
}

/** A value an earlier stage must have set; its absence is a bug in the order of the stages. */
export function established<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new DomainError('internal', `The execution pipeline has no ${what} yet.`);
  return value;
}

export const fail = (kind: DomainError['kind'], message: string, code?: DomainError['code'], extra?: Record<string, string>, cause?: unknown) =>
  new DomainError(kind, message, code, extra, { cause });

import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * What the HTTP layer tells an observer (metrics) about each answer. `route` is the route's
 * pattern (`/trust-records/{id}`), never the raw path, so its values are bounded; requests that
 * match no route are `unmatched`.
 */
export interface HttpObserver {
  answered(info: { method: string; route: string; status: number; seconds: number }): void;
  /** A decision of `POST /execute` or `POST /transactions`, read from the answer. */
  decided?(info: { route: string; outcome: DecisionOutcome }): void;
}

/** approve (released or recorded), reject (refused by policy), override (approved, waits for a human). */
export const DECISION_OUTCOMES = ['approve', 'reject', 'override'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/** The POST routes whose answers carry a decision (their patterns, as `route` names them). */
export const DECIDING_ROUTES = ['/execute', '/transactions'] as const;
const DECIDING = new Set(DECIDING_ROUTES.map((r) => `post ${r}`));

/** Calls the observer when the answer is sent; for deciding routes also reads the decision from the JSON answer. */
export function observeAnswers(observer: HttpObserver, method: string, route: string): RequestHandler {
  const deciding = DECIDING.has(`${method} ${route}`) && observer.decided !== undefined;
  return (_req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    let answer: unknown;
    if (deciding) {
      const json = res.json.bind(res);
      res.json = (body: unknown) => {
        answer = body;
        return json(body);
      };
    }
    res.once('finish', () => {
      observer.answered({ method: method.toUpperCase(), route, status: res.statusCode, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
      const outcome = deciding ? decisionOf(res.statusCode, answer) : undefined;
      if (outcome) observer.decided!({ route, outcome });
    });
    next();
  };
}

function decisionOf(status: number, answer: unknown): DecisionOutcome | undefined {
  if (typeof answer !== 'object' || answer === null) return undefined;
  const a = answer as { decision?: { action?: unknown; requires_override?: unknown }; code?: unknown };
  if (status === 403 && a.code === 'POLICY_DENIED') return 'reject';
  if (status >= 300 || !a.decision) return undefined;
  if (a.decision.action === 'reject') return 'reject';
  return a.decision.requires_override === true ? 'override' : 'approve';
}

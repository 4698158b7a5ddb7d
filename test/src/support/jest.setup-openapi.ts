import { afterEach } from '@jest/globals';

/**
 * Fails the test whose requests got a response the OpenAPI document does not describe (collected
 * by support/openapi-responses.ts on every in-process test server). Read through a global symbol,
 * so that tests which start no server do not load the validator.
 */
const SINK = Symbol.for('ets.openapi.responseProblems');

afterEach(() => {
  const problems = ((globalThis as Record<symbol, string[] | undefined>)[SINK] ?? []).splice(0);
  if (problems.length > 0) throw new Error(`Responses not as the OpenAPI document says:\n- ${problems.join('\n- ')}`);
});

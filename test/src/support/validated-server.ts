/**
 * What `@ets/server` is in a jest run (jest.config.js maps it here): the server package as it is,
 * except that every in-process server a test starts, through `startTestServer` or by calling
 * `startServer` itself, has its responses checked against the OpenAPI document of its profile
 * (openapi-responses.ts). The check hooks the one function every in-process server comes from, so
 * no test can start one that bypasses it.
 */
import { checkResponsesAgainstOpenApi, responseValidatorFor } from './openapi-responses.js';
// The package's source by path: `@ets/server` itself would resolve to this module.
import { startServer as startUncheckedServer } from '../../../apps/server/src/index.js';

export * from '../../../apps/server/src/index.js';

export const startServer: typeof startUncheckedServer = async (settings, logger, hooks) => {
  const running = await startUncheckedServer(settings, logger, hooks);
  checkResponsesAgainstOpenApi(running.httpApp, responseValidatorFor(settings.profile));
  return running;
};

import { describe, expect, it } from '@jest/globals';
import { buildOpenApiDocument } from '@ets/adapters-http';
import { committedTypes, GENERATED, generatedTypes } from '../scripts/generate-types.mjs';

/**
 * The client's types are generated from the OpenAPI document the service serves. A route, field,
 * status or code added to the fragments without `npm run generate -w @ets/client` fails here.
 */
describe('the generated API types', () => {
  it.each(Object.keys(GENERATED) as (keyof typeof GENERATED)[])('of the %s profile are those of the served document', async (profile) => {
    const expected = await generatedTypes(buildOpenApiDocument(profile), profile);
    const committed = committedTypes(profile);
    if (committed !== expected) {
      throw new Error(`${GENERATED[profile]} differs from the served OpenAPI document of the ${profile} profile: run \`npm run generate -w @ets/client\` and commit the result.`);
    }
    expect(committed).toBe(expected);
  });
});

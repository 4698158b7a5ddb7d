// One jest run for the whole workspace. Sources are compiled by ts-jest (transpile only: `tsc
// --build` in `npm test` is the type check), and `@ets/*` maps to each package's src so a test
// never runs against a stale dist.
/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  roots: ['<rootDir>/packages', '<rootDir>/apps', '<rootDir>/test'],
  testMatch: ['**/src/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  moduleNameMapper: {
    // The server package with every in-process server's responses checked against the OpenAPI
    // document (test/src/support/validated-server.ts).
    '^@ets/server$': '<rootDir>/test/src/support/validated-server.ts',
    '^@ets/test-support$': '<rootDir>/test/src/support/index.ts',
    '^@ets/(domain|adapters-[a-z]+|release-receiver|loopback-network)$': '<rootDir>/packages/$1/src/index.ts',
    '^@ets/(adapters-[a-z]+|release-receiver)/([a-z-]+)$': '<rootDir>/packages/$1/src/$2.ts',
    // The client's Node build; its browser build (src/index.ts) is loaded in Chromium by the browser tests.
    '^@ets/client$': '<rootDir>/packages/client/src/node.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.jest.json' }],
  },
  // Every response of an in-process test server is checked against the OpenAPI document (the
  // `@ets/server` mapping above); a test whose responses are not as documented fails
  // (test/src/support/openapi-responses.ts).
  setupFilesAfterEnv: ['<rootDir>/test/src/support/jest.setup-openapi.ts'],
  // Points SOFTHSM2_CONF at a token directory of the run's own, before the workers start (the pkcs11 tests).
  globalSetup: '<rootDir>/test/global-setup.mjs',
  globalTeardown: '<rootDir>/test/global-teardown.mjs',
  // Generous: CI shares two cores between two workers, spawned servers and PostgreSQL.
  testTimeout: 90000,
  maxWorkers: 2,
  // A worker's heap grows with each suite it runs (ESM modules stay loaded): at 2 to 3 GB every
  // collection is slow. A worker over this after a suite is replaced by a fresh one.
  workerIdleMemoryLimit: '1GB',
};

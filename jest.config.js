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
    '^@ets/server$': '<rootDir>/apps/server/src/index.ts',
    '^@ets/test-support$': '<rootDir>/test/src/support/index.ts',
    '^@ets/(domain|adapters-[a-z]+)$': '<rootDir>/packages/$1/src/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.jest.json' }],
  },
  // Generous: CI shares two cores between two workers, spawned servers and PostgreSQL.
  testTimeout: 90000,
  maxWorkers: 2,
};

/**
 * The floors of the house, checked on every `npm test` (`npm run lint:deps`): no import cycles in
 * any package or the server, and a domain that imports no adapter, no other workspace package and
 * no Node.js built-in. Type-only imports count (`tsPreCompilationDeps`): a cycle through types is
 * still a knot in the design. `@ets/*` resolves to each package's src (tsconfig.depcruise.json),
 * so the check needs no build. scripts/check-domain-purity.mjs keeps the domain free of frameworks,
 * ORMs and crypto libraries; this keeps its arrows pointing down.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A module must not reach itself through its imports (type-only ones included). Move the shared type a floor down.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-depends-on-no-adapter',
      severity: 'error',
      comment: 'packages/domain is the ground floor: it imports no adapter, no app and no other workspace package; they import it.',
      from: { path: '^packages/domain/' },
      // The shipped sample policies are data, not code: the domain's tests check them against its rules.
      to: { path: '^(packages/(?!domain/)|apps/)', pathNot: '^apps/server/policies/[^/]+[.]json$' },
    },
    {
      name: 'domain-uses-no-node-built-in',
      severity: 'error',
      comment: 'packages/domain does no I/O: time, randomness, hashing and storage are ports.',
      from: { path: '^packages/domain/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that cannot be resolved cannot be checked by the rules above.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.depcruise.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)dist/' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};

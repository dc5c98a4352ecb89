/**
 * The house's rules, checked by test/unit/house.test.ts (`npm test`): no import circle in src/.
 * Shared types live in a module below everything that uses them; a type-only import counts as an
 * edge (tsPreCompilationDeps), so `import type` does not hide a circle.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Move the shared types down into a module that imports none of their users.',
      from: {},
      to: { circular: true },
    },
    {
      // An import the cruiser cannot resolve is an edge it cannot see: fail rather than miss a circle.
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // NodeNext: `./x.js` specifiers resolve to `./x.ts` through the project's tsconfig.
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },
};

import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
// One copy of graphql for everything. Node (and so every dependency vitest leaves external:
// yoga, pothos) loads graphql's CommonJS build; vite alone would pick its ESM build for our
// sources. Two copies make `instanceof GraphQLError` fail across the boundary, which silently
// turns our own errors into masked ones. Point vite at the very file Node loads.
const graphqlEntry = require.resolve('graphql');

export default defineConfig({
  resolve: {
    alias: [{ find: /^graphql$/, replacement: graphqlEntry }],
  },
  test: {
    include: ['test/**/*.test.ts', 'console/test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // The guard against a test that hangs, not a measure of speed: it sits above the waits a test
    // names itself (eventually(..., timeout), a child process's start), so that on a slow machine
    // a test fails on the wait that names what it awaited, or not at all. CI runs the suite twice
    // on 2 cores; there a child process's start alone (node with tsx) took over 10 s, and tests
    // that start two of them went past the 30 s this was.
    testTimeout: 120_000,
    hookTimeout: 90_000,
    pool: 'forks',
    // Each file clones its own database from the template, so files run in parallel.
    fileParallelism: true,
  },
});

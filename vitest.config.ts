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
    testTimeout: 30_000,
    hookTimeout: 90_000,
    pool: 'forks',
    // Each file clones its own database from the template, so files run in parallel.
    fileParallelism: true,
  },
});

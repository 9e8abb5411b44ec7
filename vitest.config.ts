import { createRequire } from 'node:module';
import path from 'node:path';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
// One copy of graphql for everything: a second copy (ESM vs CJS) makes `instanceof GraphQLError`
// fail across the boundary and silently turns our own errors into masked ones.
const graphqlDir = path.dirname(require.resolve('graphql/package.json'));

export default defineConfig({
  resolve: {
    alias: [{ find: /^graphql$/, replacement: path.join(graphqlDir, 'index.mjs') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 90_000,
    pool: 'forks',
    // Each file clones its own database from the template, so files run in parallel.
    fileParallelism: true,
    server: { deps: { inline: [/graphql-yoga/, /@graphql-yoga/, /@pothos/, /@graphql-tools/, /@envelop/] } },
  },
});

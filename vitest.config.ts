import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
// One copy of graphql for everything. Node (and so every dependency vitest leaves external:
// yoga, pothos) loads graphql's CommonJS build; vite alone would pick its ESM build for our
// sources. Two copies make `instanceof GraphQLError` fail across the boundary, which silently
// turns our own errors into masked ones. Point vite at the very file Node loads. Every project
// below extends this config, so each gets the alias.
const graphqlEntry = require.resolve('graphql');

/** Tests of pure code: no database, no global setup, no child process. */
const UNIT = [
  'console/test/execution-search.test.ts',
  'console/test/format.test.ts',
  'console/test/live-state.test.ts',
  'console/test/paging.test.ts',
  'console/test/patches.test.ts',
  'console/test/search-syntax.test.ts',
  'test/environment.test.ts',
  'test/console/serve.test.ts',
  'test/db/advisory-locks.test.ts',
  'test/db/migrations-frozen.test.ts',
  'test/engine/due-timer.test.ts',
  'test/graphql/schema-policy.test.ts',
  'test/metrics/environment.test.ts',
  'test/metrics/startup-probes.test.ts',
  'test/service/cron-walk.test.ts',
  'test/service/cron.test.ts',
  'test/service/load-bounds.test.ts',
  'test/subscriptions/shared-event-results.test.ts',
  'test/subscriptions/key-watch.test.ts',
  'test/subscriptions/watermark.test.ts',
];

/**
 * Tests that start processes: jobgate's CLI and the worker programs of test/support (run from
 * the build, see test/support/global-build.ts), embedded Postgres clusters, Chromium, vitest
 * itself. They use the CPU while they start, where the database tests mostly wait.
 */
const PROCESS = [
  'test/cli.closed-output.test.ts',
  'test/cli.installed.test.ts',
  'test/cli.reset.test.ts',
  'test/cli.test.ts',
  // Every browser test (Chromium is a process of its own, and the console is built for them).
  'test/console/*.e2e.test.ts',
  'test/db/embedded-log.test.ts',
  'test/db/embedded-permissions.test.ts',
  'test/db/embedded.test.ts',
  // A primary crashes and its synchronous replica is promoted, behind one address that moves.
  'test/db/failover.test.ts',
  // A PgBouncer process in front of the server, and jobgate started through it.
  'test/db/pgbouncer.test.ts',
  // A primary and a streaming replica, clusters of their own.
  'test/db/read-replica.test.ts',
  'test/docs/examples.test.ts',
  'test/engine/crash.test.ts',
  // Worker processes run a diamond and a batch; one is killed with SIGKILL.
  'test/engine/workflows.crash.test.ts',
  'test/engine/fenced.test.ts',
  'test/engine/intervals.test.ts',
  // Network faults through a TCP proxy that resets every connection, as the outage tests: on the
  // embedded server, in the shared module graph of the db group, one of its tests hung twice.
  'test/engine/lost-claims.test.ts',
  'test/engine/outage.startup.test.ts',
  'test/engine/outage.test.ts',
  'test/engine/recoverable.test.ts',
  'test/logs.test.ts',
  'test/metrics/health.test.ts',
  'test/subscriptions/live-resilience.test.ts',
  'test/support/setup-failure.test.ts',
];

const ALL = ['test/**/*.test.ts', 'console/test/**/*.test.ts'];

// A file renamed or moved without its entry here would silently change group.
for (const file of [...UNIT, ...PROCESS].filter((f) => !f.includes('*'))) {
  if (!existsSync(new URL(file, import.meta.url))) throw new Error(`vitest.config.ts lists ${file}, which does not exist`);
}

export default defineConfig({
  resolve: {
    alias: [{ find: /^graphql$/, replacement: graphqlEntry }],
  },
  test: {
    // The guard against a test that hangs, not a measure of speed: it sits above the waits a test
    // names itself (eventually(..., timeout), a child process's start), so that on a slow machine
    // a test fails on the wait that names what it awaited, or not at all.
    testTimeout: 120_000,
    hookTimeout: 90_000,
    pool: 'forks',
    // Most of a database test's time is spent waiting (on Postgres, a poll interval, a lease):
    // more files than cores at once keep the cores busy. The unit and database groups run
    // together and so share this count (vitest requires it); the process group sets its own.
    maxWorkers: 4,
    // After each file: nothing it started still running (test/support/leak-check.ts).
    setupFiles: ['test/support/leak-check.ts'],
    // `npm test` runs the three; `npm test -- --project unit` (or db, process) runs one.
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: UNIT, isolate: false },
      },
      {
        extends: true,
        test: {
          name: 'db',
          include: ALL,
          exclude: [...UNIT, ...PROCESS],
          // One Postgres and a migrated template for the run; each file clones the template.
          globalSetup: ['test/support/global-setup.ts'],
          // A worker runs its files one after another in one module graph: each file's imports
          // (graphql, yoga, the schema, the service) cost seconds of CPU when loaded afresh per
          // file, about half of the group's time on two cores. What a file leaves behind that
          // could reach the next (a server, a pool, a worker, a timer) fails it (leak-check.ts);
          // spies are restored and environment variables put back by the files that set them.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'process',
          include: PROCESS,
          globalSetup: ['test/support/global-setup.ts', 'test/support/global-build.ts'],
          // After the other two (a group of its own): child processes, initdb and browsers use
          // the cores themselves, so fewer files at once.
          maxWorkers: 3,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});

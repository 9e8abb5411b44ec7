/**
 * `npm test` without a database to run on: it says why in one line, not with a stack trace.
 * Each case runs the real test runner as a child process on one small test file.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function runSuite(env: Record<string, string | undefined>): { status: number | null; output: string } {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env, NO_COLOR: '1', FORCE_COLOR: '0' };
  // The runner's own variables would make the child think it is a worker of this run.
  for (const name of Object.keys(childEnv)) if (name.startsWith('VITEST') || name === 'NODE_OPTIONS') delete childEnv[name];
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name];
  // A file of the database group (the unit group has no database, so no setup to fail).
  const result = spawnSync(path.join(ROOT, 'node_modules', '.bin', 'vitest'), ['run', 'test/library.test.ts'], {
    cwd: ROOT,
    env: childEnv,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` };
}

function expectOneClearLine(output: string, reason: RegExp): void {
  const lines = output.split('\n').filter((l) => l.startsWith('jobgate tests: '));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(reason);
  expect(output).not.toMatch(/No test files found|Unhandled Error|\n\s+at |❯/);
}

describe('the test suite without a database', () => {
  it('says in one line that the embedded Postgres could not start, and why', () => {
    const { status, output } = runSuite({ TEST_DATABASE_URL: undefined, TMPDIR: '/nonexistent/jobgate-no-tmp' });
    expect(status).toBe(1);
    expectOneClearLine(output, /cannot run: no database \(an embedded Postgres\): .*ENOENT.*\/nonexistent\/jobgate-no-tmp/);
  });

  it('says in one line that the server at TEST_DATABASE_URL cannot be reached', () => {
    const { status, output } = runSuite({ TEST_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/postgres' });
    expect(status).toBe(1);
    expectOneClearLine(output, /cannot run: no database \(the server at TEST_DATABASE_URL\): .*ECONNREFUSED/);
  });
});

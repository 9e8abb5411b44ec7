/**
 * What the process tests start, from the build (test/support/global-build.ts makes sure it is
 * fresh): the CLI as installed, and the child programs of test/support transpiled once per run.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** `node JOBGATE_BIN <command>` runs `jobgate <command>` from `dist/`, as an installed jobgate does. */
export const JOBGATE_BIN = path.join(ROOT, 'bin', 'jobgate.mjs');

export type ChildProgram = 'worker-process' | 'fenced-worker-process' | 'runner-process' | 'interval-process' | 'library-worker-process';

/** The path of test/support/`name`.ts, transpiled, for `node <path>`. */
export function childProgram(name: ChildProgram): string {
  return path.join(inject('childProgramsDir'), `${name}.mjs`);
}

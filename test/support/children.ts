/**
 * What the process tests start, from the build (test/support/global-build.ts makes sure it is
 * fresh): the CLI as installed, and the child programs of test/support transpiled once per run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
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

/**
 * Worker processes (test/support/worker-process.ts) a test starts and kills: `start` resolves
 * once the worker says `ready` (rejecting with its stderr if it exits first); `killAll` SIGKILLs
 * those still running and waits for them to exit.
 */
export function workerProcesses(databaseUrl: () => string) {
  const running = new Set<ChildProcess>();
  return {
    start(id: string, env: Record<string, string> = {}): Promise<ChildProcess> {
      const child = spawn(process.execPath, [childProgram('worker-process')], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: databaseUrl(), WORKER_ID: id, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      running.add(child);
      child.once('exit', () => running.delete(child));
      let err = '';
      child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
      return new Promise((resolve, reject) => {
        child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve(child));
        child.once('exit', (code) => reject(new Error(`worker ${id} exited (${code}) before ready:\n${err}`)));
      });
    },
    async killAll(): Promise<void> {
      const exits = [...running].map(
        (c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r))),
      );
      for (const c of running) c.kill('SIGKILL');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(exits), new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
    },
  };
}

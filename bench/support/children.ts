/**
 * Benchmark worker processes: `node --import tsx <script>`, talking in lines. The child prints
 * `ready` once set up, starts when it reads `go`, and exits when its stdin closes, so it never
 * outlives the benchmark; the parent also kills it on any exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { onCleanup } from './cleanup.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface Child {
  pid: number;
  /** Resolves with the first stdout line starting with `prefix` (the rest of it, trimmed). */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  send(line: string): void;
  /** Closes stdin (the child exits), SIGKILL after `graceMs`. Resolves on exit. */
  stop(graceMs?: number): Promise<void>;
}

export function spawnChild(script: string, env: Record<string, string>): Child {
  // BENCH_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", to look inside a worker.
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const proc: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let exited = false;
  let stderr = '';
  const exit = new Promise<void>((resolve) => proc.once('exit', () => ((exited = true), resolve())));
  const dispose = onCleanup(
    `child ${proc.pid}`,
    async () => {
      if (!exited) proc.kill('SIGKILL');
      await exit;
    },
    () => void (exited || proc.kill('SIGKILL')),
  );
  proc.stderr!.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000);
    if (process.env.BENCH_VERBOSE) process.stderr.write(c);
  });
  proc.stdin!.on('error', () => {});

  const lines: string[] = [];
  const waiters: { prefix: string; resolve: (rest: string) => void }[] = [];
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    const w = waiters.findIndex((x) => l.startsWith(x.prefix));
    if (w < 0) return void lines.push(l);
    const waiter = waiters.splice(w, 1)[0]!;
    waiter.resolve(l.slice(waiter.prefix.length));
  });

  return {
    pid: proc.pid!,
    line(prefix, timeoutMs = 60_000) {
      const i = lines.findIndex((l) => l.startsWith(prefix));
      if (i >= 0) return Promise.resolve(lines.splice(i, 1)[0]!.slice(prefix.length).trim());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${script} (pid ${proc.pid}): no "${prefix}" within ${timeoutMs} ms\n${stderr}`)),
          timeoutMs,
        );
        const waiter = {
          prefix,
          resolve: (rest: string) => {
            clearTimeout(timer);
            resolve(rest.trim());
          },
        };
        waiters.push(waiter);
        void exit.then(() => {
          clearTimeout(timer);
          if (waiters.includes(waiter)) reject(new Error(`${script} (pid ${proc.pid}) exited before "${prefix}":\n${stderr}`));
        });
      });
    },
    send(line) {
      proc.stdin!.write(`${line}\n`);
    },
    async stop(graceMs = 5000) {
      proc.stdin!.end();
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
      await dispose();
    },
  };
}

/**
 * jobgate's own CLI in a process of its own, as deployed (and as `npm start` runs it): compiled
 * (`npm run build`, see `buildDist`) and run with node, so its memory and CPU (read from /proc)
 * are its own; running it through tsx instead would add about 100 MB of RSS for the transpiler.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { onCleanup } from './cleanup.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Compiles src into dist (what `jobgate` runs). */
export function buildDist(): void {
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: ROOT,
    stdio: 'inherit',
  });
}

export interface CliProcess {
  pid: number;
  /** The gateway's port (`serve`, `start`); undefined for `worker`. */
  port: string | undefined;
  /** The process's resident memory (bytes) and CPU time so far (µs), from /proc. */
  stats(): { rss: number; cpuMicros: number; at: number };
  /** SIGTERM, and resolves on exit. */
  stop(): Promise<void>;
}

/** What the process logs once it is up: the gateway's address, or the worker's start. */
const READY = { serve: /GraphiQL at http:\/\/[^:]+:(\d+)\//, start: /GraphiQL at http:\/\/[^:]+:(\d+)\//, worker: /worker \S+: started()/ };

/**
 * `node dist/cli/main.js <command>` with `env` over this process's; resolves once it is up.
 * `flags` go to node (e.g. --max-old-space-size); BENCH_NODE_ARGS, e.g. "--cpu-prof
 * --cpu-prof-dir=/tmp/prof", adds more, to look inside it.
 */
export async function startCli(command: keyof typeof READY, env: Record<string, string>, flags: string[] = []): Promise<CliProcess> {
  const nodeArgs = [...flags, ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];
  const child = spawn(process.execPath, [...nodeArgs, 'dist/cli/main.js', command], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', JOBGATE_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stop = onCleanup(
    `jobgate ${command} ${child.pid}`,
    async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    },
    () => void child.kill('SIGKILL'),
  );
  const port = await new Promise<string>((resolve, reject) => {
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = READY[command].exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    if (process.env.BENCH_VERBOSE) child.stdout!.on('data', (b: Buffer) => process.stderr.write(b));
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`jobgate ${command} exited (${code}):\n${out}`)));
  });
  const ticks = 100; // USER_HZ on Linux
  const stats = () => {
    const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
    const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
    const fields = fs.readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    const cpuMicros = ((Number(fields[11]) + Number(fields[12])) / ticks) * 1e6; // utime + stime
    return { rss, cpuMicros, at: performance.now() };
  };
  return { pid: child.pid!, port: port || undefined, stats, stop };
}

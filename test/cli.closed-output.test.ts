/**
 * `jobgate start 2>&1 | tee log`, then Ctrl-C: the terminal's SIGINT reaches the whole pipeline,
 * so `tee` is gone by the time jobgate writes its shutdown lines. Real processes, a real signal,
 * and a reader that closes its end of the pipe first: jobgate must still stop everything it
 * started (the embedded Postgres above all, which runs in a process group of its own and outlives
 * a jobgate that dies half-way) and exit as a stop does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, postmasterPid, processesMentioning } from './support/embedded-processes.js';
import { eventually } from './support/eventually.js';

const ROOT = path.resolve(import.meta.dirname, '..');
// initdb and migrations on a busy machine.
const START_TIMEOUT = 60_000;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const children = new Set<ChildProcess>();
const dirs: string[] = [];

function makeDataDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-closed-output-'));
  fs.chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}

/** `jobgate <args>` on the embedded default in `dataDir`, its stdout and stderr on pipes to this process. */
function jobgate(dataDir: string, args: string[]) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    JOBGATE_DATA_DIR: dataDir,
    PORT: '0',
    DATABASE_URL: '',
    JOBGATE_LOG_LEVEL: 'info',
    JOBGATE_LOG_FORMAT: 'pretty',
  };
  for (const name of ['TEST_DATABASE_URL', 'JOBGATE_EMBEDDED_PORT', 'HOST', 'NODE_OPTIONS']) delete env[name];
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    });
  });
  return {
    child,
    exited,
    output: () => output,
    /** The reader goes away: its ends of the pipes close, and jobgate's next write to one fails (EPIPE). */
    closeReader(streams: ('stdout' | 'stderr')[] = ['stdout', 'stderr']) {
      for (const s of streams) child[s]!.destroy();
    },
  };
}

afterEach(async () => {
  for (const child of children) child.kill('SIGKILL');
  await eventually(() => children.size === 0, { timeout: 10_000, what: 'every jobgate child exited' }).catch(() => {});
  for (const dir of dirs.splice(0)) {
    // What a jobgate that died half-way left behind.
    const pg = postmasterPid(dir);
    if (pg !== undefined && isAlive(pg)) {
      process.kill(pg, 'SIGQUIT');
      await eventually(() => !isAlive(pg), { timeout: 10_000, what: `postgres ${pg} exited` }).catch(() => {});
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

describe('jobgate whose output pipe closed before it stops', { timeout: 120_000 }, () => {
  it('start: on SIGINT after the reader of its stdout and stderr exited, stops the embedded Postgres and exits 0', async () => {
    const dataDir = makeDataDir();
    const jg = jobgate(dataDir, ['start']);
    await eventually(() => /gateway: GraphQL and GraphiQL at http/.test(jg.output()), {
      timeout: START_TIMEOUT,
      what: 'the gateway serving',
    }).catch((error: Error) => {
      throw new Error(`${error.message}; its output:\n${jg.output()}`);
    });
    const pgPid = postmasterPid(dataDir)!;
    expect(isAlive(pgPid)).toBe(true);

    jg.closeReader();
    jg.child.kill('SIGINT');
    expect(await jg.exited).toEqual({ code: 0, signal: null });
    // Stopped by the shutdown, before the exit: nothing of the cluster is left running.
    expect(isAlive(pgPid)).toBe(false);
    expect(processesMentioning(path.join(dataDir, 'pg'))).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  });

  it('keys create: with nobody reading its stdout, fails (the key could not be shown) and stops the embedded Postgres', async () => {
    const dataDir = makeDataDir();
    const jg = jobgate(dataDir, ['keys', 'create', '--role', 'VIEWER']);
    // Its stderr still read, so the test sees how far it got.
    jg.closeReader(['stdout']);
    expect(await jg.exited).toEqual({ code: 1, signal: null });
    expect(processesMentioning(path.join(dataDir, 'pg'))).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
    expect(jg.output()).toMatch(/could not print the key/);
  });
});

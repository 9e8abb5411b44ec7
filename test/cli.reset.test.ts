/**
 * `jobgate db url` and `jobgate reset` on a real embedded default, as a newcomer meets them: a
 * real `jobgate start` on a data folder in a fresh temporary folder (0700: run as root, the
 * cluster is relocated under /var/tmp, the case `rm -rf .jobgate` left behind), real commands.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { fallbackClusterDir, removeEmbeddedData } from '../src/db/embedded-files.js';
import { createLogger } from '../src/log.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const READY = /gateway: GraphQL and GraphiQL at (http:\/\/\S+)/;
const START_TIMEOUT = 90_000;

const children = new Set<ChildProcess>();
const dirs: string[] = [];

function envFor(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    JOBGATE_DATA_DIR: dataDir,
    PORT: '0',
    DATABASE_URL: '',
    JOBGATE_LOG_LEVEL: 'info',
    JOBGATE_LOG_FORMAT: 'pretty',
  };
  for (const name of ['TEST_DATABASE_URL', 'JOBGATE_EMBEDDED_PORT', 'HOST', 'NODE_OPTIONS']) delete env[name];
  return env;
}

/** Runs a CLI command to its end, with `input` on stdin. */
function run(dataDir: string, args: string[], input = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), ...args], { cwd: ROOT, env: envFor(dataDir) });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => {
      children.delete(child);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

/** `jobgate start` on `dataDir`, once it serves; `stop()` sends SIGTERM, `kill()` SIGKILL, and each waits for its exit. */
async function start(dataDir: string): Promise<{ stop(): Promise<number | null>; kill(): Promise<number | null> }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), 'start'], {
    cwd: ROOT,
    env: envFor(dataDir),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('close', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`jobgate start did not serve in time:\n${stderr}`)), START_TIMEOUT);
    child.stderr!.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
      if (READY.test(stderr)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`jobgate start exited (${code}) before serving:\n${stderr}`));
    });
  });
  return {
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
    kill: () => {
      child.kill('SIGKILL');
      return exited;
    },
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie answers signal 0 but is not running.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

afterEach(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) {
    await removeEmbeddedData(dir, createLogger('silent')).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

describe('the embedded default from the command line', () => {
  it("db url connects to the running server's jobgate database; keys create and reset are refused while it runs, reset asks, removes the relocated cluster too, and the next start begins afresh", async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-reset-test-'));
    dirs.push(parent);
    const dataDir = path.join(parent, '.jobgate');
    const relocated = fallbackClusterDir(dataDir);

    let jobgate = await start(dataDir);
    // Where the cluster went: under /var/tmp for a root user (the postgres user cannot enter the
    // 0700 parent), else in the data folder.
    const clusterDir = fs.existsSync(relocated) ? relocated : path.join(dataDir, 'pg');
    expect(fs.existsSync(path.join(clusterDir, 'PG_VERSION'))).toBe(true);
    if (process.getuid?.() === 0) expect(clusterDir).toBe(relocated);

    const url = await run(dataDir, ['db', 'url']);
    expect(url.code, url.stderr).toBe(0);
    const client = new pg.Client({ connectionString: url.stdout.trim() });
    await client.connect();
    try {
      const { rows } = await client.query<{ db: string; keys: string }>(
        'select current_database() as db, count(*)::text as keys from api_keys',
      );
      expect(rows[0]).toEqual({ db: 'jobgate', keys: '1' });
    } finally {
      await client.end();
    }

    const keyWhileRunning = await run(dataDir, ['keys', 'create', '--role', 'VIEWER']);
    expect(keyWhileRunning.code).toBe(1);
    expect(keyWhileRunning.stderr).toMatch(
      /jobgate: keys create: jobgate \(pid \d+\) is running on the embedded Postgres .*createApiKey mutation/,
    );

    const whileRunning = await run(dataDir, ['reset', '--yes']);
    expect(whileRunning.code).toBe(1);
    expect(whileRunning.stderr).toMatch(/jobgate: reset: jobgate \(pid \d+\) is running on the embedded Postgres in .*; stop it first/);
    expect(fs.existsSync(path.join(clusterDir, 'PG_VERSION'))).toBe(true);

    expect(await jobgate.stop()).toBe(0);
    const notRunning = await run(dataDir, ['db', 'url']);
    expect(notRunning.code).toBe(1);
    expect(notRunning.stderr).toMatch(/is not running: start jobgate/);

    const declined = await run(dataDir, ['reset'], 'no\n');
    expect(declined.code).toBe(1);
    expect(declined.stderr).toContain(clusterDir);
    expect(declined.stderr).toContain('Remove them? [y/N]');
    expect(declined.stderr).toContain('not confirmed; nothing removed');
    expect(fs.existsSync(path.join(clusterDir, 'PG_VERSION'))).toBe(true);
    expect(fs.existsSync(path.join(dataDir, 'admin-key'))).toBe(true);

    const confirmed = await run(dataDir, ['reset'], 'yes\n');
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(confirmed.stdout).toMatch(/^removed \d+ paths; the next start begins afresh\n$/);
    expect(fs.existsSync(clusterDir)).toBe(false);
    expect(fs.existsSync(dataDir)).toBe(false);

    const again = await run(dataDir, ['reset', '--yes']);
    expect(again).toMatchObject({ code: 0, stdout: expect.stringMatching(/^nothing to remove/) });

    // The next start initialises a new cluster (and a new first key), where a start after
    // `rm -rf .jobgate` refused to initialise over the relocated cluster left behind.
    jobgate = await start(dataDir);
    expect(fs.existsSync(path.join(clusterDir, 'PG_VERSION'))).toBe(true);
    expect(fs.readFileSync(path.join(dataDir, 'admin-key'), 'utf8')).toMatch(/^jg_/);

    // Killed outright, jobgate leaves its Postgres running (a process group of its own): reset
    // stops that server before it removes its cluster.
    const postmaster = Number.parseInt(fs.readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]!, 10);
    expect(await jobgate.kill()).toBe(null);
    expect(isAlive(postmaster)).toBe(true);
    const afterKill = await run(dataDir, ['reset', '--yes']);
    expect(afterKill.code, afterKill.stderr).toBe(0);
    expect(isAlive(postmaster)).toBe(false);
    expect(fs.existsSync(clusterDir)).toBe(false);
  });

  it('reset keeps what it did not write in the data folder', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-reset-test-'));
    dirs.push(dataDir);
    fs.writeFileSync(path.join(dataDir, 'postgres.log'), 'a log\n');
    fs.writeFileSync(path.join(dataDir, 'notes.txt'), 'mine\n');
    const result = await run(dataDir, ['reset', '--yes']);
    expect(result.code, result.stderr).toBe(0);
    expect(fs.readdirSync(dataDir)).toEqual(['notes.txt']);
  });
});

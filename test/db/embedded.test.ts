/**
 * The embedded default as a user meets it: real `jobgate start` processes on a data folder,
 * real signals, real orphans.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/log.js';
import { eventually } from '../support/eventually.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const READY = /gateway: GraphQL and GraphiQL at (http:\/\/\S+)/;
/**
 * A start's budget: initdb and the migrations take seconds on an idle machine and most of a
 * minute on a loaded 2-core one (the suite runs beside itself in CI). Each test's timeout covers
 * its starts: a slow start is waited for, a start that never serves still fails.
 */
const START_TIMEOUT = 90_000;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Jobgate {
  child: ChildProcess;
  pid: number;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stderr; rejects if the process exits first. */
  waitFor(pattern: RegExp, ms?: number): Promise<RegExpMatchArray>;
  exited: Promise<Exit>;
}

const children = new Set<ChildProcess>();
/** Embedded servers a test started in this process. */
const stopLater: (() => Promise<void>)[] = [];
const dirs: string[] = [];

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie answers signal 0 but is not running.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true;
  }
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]!, 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Pids of live processes whose command line mentions `needle`. */
function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(needle) && isAlive(Number(entry))) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function waitUntil(what: string, predicate: () => boolean, ms = 20_000): Promise<void> {
  await eventually(predicate, { timeout: ms, interval: 50, what });
}

function makeDataDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-embedded-test-'));
  fs.chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}

/** The pid of a child process of `parent` whose command is `name`, if one runs (Linux's /proc). */
function childNamed(parent: number, name: string): number | undefined {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // pid (comm) state ppid ...
      const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(fs.readFileSync(`/proc/${entry}/stat`, 'utf8'));
      if (m && m[1] === name && Number(m[2]) === parent) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

function startJobgate(dataDir: string, args: string[] = ['start'], extraEnv: NodeJS.ProcessEnv = {}, group = false): Jobgate {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    JOBGATE_DATA_DIR: dataDir,
    PORT: '0',
    DATABASE_URL: '',
    JOBGATE_LOG_LEVEL: 'info',
    // These tests read the lines as a person would (JSON lines are the default off a terminal).
    JOBGATE_LOG_FORMAT: 'pretty',
    ...extraEnv,
  };
  for (const name of ['TEST_DATABASE_URL', 'JOBGATE_EMBEDDED_PORT', 'HOST', 'NODE_OPTIONS']) delete env[name];
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    // A process group of its own, as a terminal gives a command: its Ctrl-C reaches every process in it.
    detached: group,
  });
  children.add(child);
  let stderr = '';
  const listeners = new Set<() => void>();
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr += chunk;
    for (const l of listeners) l();
  });
  const exited = new Promise<Exit>((resolve) => {
    // 'close' comes after the exit and after the last stderr chunk.
    child.once('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    });
  });
  if (child.pid === undefined) throw new Error('could not spawn jobgate');
  return {
    child,
    pid: child.pid,
    stderr: () => stderr,
    exited,
    waitFor(pattern, ms = START_TIMEOUT) {
      return new Promise((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const done = () => {
          listeners.delete(check);
          clearTimeout(timer);
        };
        const check = () => {
          const match = pattern.exec(stderr);
          if (match) {
            done();
            resolve(match);
          }
        };
        listeners.add(check);
        timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${pattern} on jobgate's stderr:\n${stderr}`));
        }, ms);
        void exited.then((exit) => {
          if (!listeners.has(check)) return;
          check();
          if (!listeners.has(check)) return;
          done();
          reject(new Error(`jobgate exited (${JSON.stringify(exit)}) before ${pattern} appeared:\n${stderr}`));
        });
        check();
      });
    },
  };
}

/** Starts jobgate and waits until it serves; returns the GraphQL URL. */
async function startServing(dataDir: string): Promise<{ jg: Jobgate; url: string }> {
  const jg = startJobgate(dataDir);
  const match = await jg.waitFor(READY);
  const url = match[1]!;
  const keyFile = path.join(dataDir, 'admin-key');
  if (fs.existsSync(keyFile)) keyFor.set(url, fs.readFileSync(keyFile, 'utf8').trim());
  return { jg, url };
}

async function stop(jg: Jobgate): Promise<Exit> {
  jg.child.kill('SIGTERM');
  return jg.exited;
}

/** The ADMIN key the first start saved in the data folder, for the folder a URL's process serves. */
const keyFor = new Map<string, string>();

async function gql(url: string, query: string): Promise<Record<string, any>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${keyFor.get(url) ?? ''}` },
    body: JSON.stringify({ query }),
  });
  const body = (await res.json()) as { data?: Record<string, any>; errors?: unknown };
  expect(body.errors).toBeUndefined();
  expect(res.status).toBe(200);
  return body.data!;
}

const configNames = async (url: string) =>
  ((await gql(url, '{ configs { nodes { name } } }')).configs.nodes as { name: string }[]).map((n) => n.name);

afterEach(async () => {
  for (const stopServer of stopLater.splice(0)) await stopServer().catch(() => {});
  for (const child of children) child.kill('SIGKILL');
  await waitUntil('every jobgate child exited', () => children.size === 0, 10_000).catch(() => {});
  for (const dir of dirs.splice(0)) {
    // A test that failed half-way may have left a Postgres behind.
    const pg = postmasterPid(dir);
    if (pg !== undefined && isAlive(pg)) {
      process.kill(pg, 'SIGQUIT');
      await waitUntil(`postgres ${pg} exited`, () => !isAlive(pg), 10_000).catch(() => {});
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Each test starts jobgate (initdb, migrations) once or twice: a few seconds per start.
describe('jobgate start on the embedded Postgres', { timeout: 2 * START_TIMEOUT + 30_000 }, () => {
  it('initialises a cluster on first start, serves GraphQL, and on SIGTERM exits 0 leaving no postgres and no lock file', async () => {
    const dataDir = makeDataDir();
    const { jg, url } = await startServing(dataDir);
    expect(jg.stderr()).toContain(`embedded postgres: initialising a new cluster in ${path.join(dataDir, 'pg')}`);
    // The first start creates an ADMIN key and saves it for the user; the log names the file,
    // never the key (log shippers keep every line; it is shown on stderr only to a terminal).
    const key = fs.readFileSync(path.join(dataDir, 'admin-key'), 'utf8').trim();
    expect(key).toMatch(/^jg_/);
    expect(jg.stderr()).toContain(`created the first ADMIN key and saved it in ${path.join(dataDir, 'admin-key')}`);
    expect(jg.stderr()).not.toContain(key);
    expect((fs.statSync(path.join(dataDir, 'admin-key')).mode & 0o777).toString(8)).toBe('600');
    const anonymous = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"query":"{ workspace { slug } }"}',
    });
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('UNAUTHENTICATED');
    expect(jg.stderr()).toMatch(/embedded postgres: ready on 127\.0\.0\.1:\d+; data in /);
    expect(fs.existsSync(path.join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
    expect(fs.statSync(path.join(dataDir, 'postgres-credentials.json')).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(path.join(dataDir, 'jobgate.pid'), 'utf8').trim()).toBe(String(jg.pid));
    const pgPid = postmasterPid(dataDir)!;
    expect(pgPid).toBeDefined();
    expect(isAlive(pgPid)).toBe(true);

    expect(await gql(url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });

    expect(await stop(jg)).toEqual({ code: 0, signal: null });
    expect(jg.stderr()).toContain('embedded postgres: stopped');
    expect(isAlive(pgPid)).toBe(false);
    expect(processesMentioning(path.join(dataDir, 'pg'))).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
    // A clean shutdown also removes Postgres's own pid file.
    expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  });

  it('keeps data across a restart on the same data folder, without initialising again', async () => {
    const dataDir = makeDataDir();
    const first = await startServing(dataDir);
    await gql(first.url, 'mutation { setConfig(input: { name: "a.b", entries: [{ key: "k", value: "v" }] }) { id } }');
    expect(await stop(first.jg)).toEqual({ code: 0, signal: null });

    const second = await startServing(dataDir);
    expect(second.jg.stderr()).not.toContain('initialising a new cluster');
    expect(second.jg.stderr()).toContain('migrations: up to date');
    expect(await configNames(second.url)).toEqual(['a.b']);
    expect(await stop(second.jg)).toEqual({ code: 0, signal: null });
  });

  it('refuses a second start on a data folder in use, naming the running pid, and the first keeps serving', async () => {
    const dataDir = makeDataDir();
    const first = await startServing(dataDir);
    const pgPid = postmasterPid(dataDir)!;

    const second = startJobgate(dataDir);
    const exit = await second.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    expect(second.stderr()).toMatch(/already running/);
    expect(second.stderr()).toContain(`pid ${first.jg.pid}`);
    expect(second.stderr()).not.toMatch(READY);

    // The refused process took nothing away from the running one.
    expect(fs.readFileSync(path.join(dataDir, 'jobgate.pid'), 'utf8').trim()).toBe(String(first.jg.pid));
    expect(postmasterPid(dataDir)).toBe(pgPid);
    expect(isAlive(pgPid)).toBe(true);
    expect(await gql(first.url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });
    expect(await stop(first.jg)).toEqual({ code: 0, signal: null });
  });

  it('recovers after the jobgate process is SIGKILLed: stops the orphaned postgres, starts, and keeps the data', async () => {
    const dataDir = makeDataDir();
    const first = await startServing(dataDir);
    await gql(first.url, 'mutation { setConfig(input: { name: "a.b", entries: [{ key: "k", value: "v" }] }) { id } }');
    const orphan = postmasterPid(dataDir)!;

    first.jg.child.kill('SIGKILL');
    expect(await first.jg.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Postgres runs in its own process group, so it outlives a killed jobgate.
    expect(isAlive(orphan)).toBe(true);
    expect(fs.readFileSync(path.join(dataDir, 'jobgate.pid'), 'utf8').trim()).toBe(String(first.jg.pid));

    const second = await startServing(dataDir);
    expect(second.jg.stderr()).toContain(`stopping postgres pid ${orphan}`);
    expect(isAlive(orphan)).toBe(false);
    const pgPid = postmasterPid(dataDir)!;
    expect(pgPid).not.toBe(orphan);
    expect(isAlive(pgPid)).toBe(true);
    expect(fs.readFileSync(path.join(dataDir, 'jobgate.pid'), 'utf8').trim()).toBe(String(second.jg.pid));
    expect(await configNames(second.url)).toEqual(['a.b']);

    expect(await stop(second.jg)).toEqual({ code: 0, signal: null });
    expect(isAlive(pgPid)).toBe(false);
  });

  it('a second signal while the first one stops stops the embedded Postgres now and exits 1, leaving no postgres and no lock file', async () => {
    const dataDir = makeDataDir();
    // The first stop keeps serving for 60 s (the delay for load balancers), as a long grace would.
    const jg = startJobgate(dataDir, ['start'], { JOBGATE_SHUTDOWN_DELAY_MS: '60000' });
    await jg.waitFor(READY);
    const pgPid = postmasterPid(dataDir)!;
    expect(isAlive(pgPid)).toBe(true);
    jg.child.kill('SIGINT');
    await jg.waitFor(/shutting down \(SIGINT\)/);
    // Node's default handler took the second one: the process died at once and its Postgres
    // ran on, orphaned.
    jg.child.kill('SIGINT');
    expect(await jg.exited).toEqual({ code: 1, signal: null });
    expect(jg.stderr()).toMatch(/SIGINT again: stopping now/);
    expect(jg.stderr()).toContain('embedded postgres: stopped');
    expect(isAlive(pgPid)).toBe(false);
    expect(processesMentioning(path.join(dataDir, 'pg'))).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
    // The next start finds nothing left to clean up.
    const { jg: next, url } = await startServing(dataDir);
    expect(next.stderr()).not.toContain('left running');
    expect(await gql(url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });
    expect(await stop(next)).toEqual({ code: 0, signal: null });
  });

  it('a SIGTERM during the first start (while initdb runs) exits cleanly and leaves a folder the next start can use', async () => {
    const dataDir = makeDataDir();
    const first = startJobgate(dataDir);
    await first.waitFor(/initialising a new cluster/);
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
    const { jg, url } = await startServing(dataDir);
    expect(await gql(url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });
    expect(await stop(jg)).toEqual({ code: 0, signal: null });
  });

  it("a Ctrl-C during the first start, which reaches initdb too, is a stop said in one line, not initdb's transcript", async () => {
    const dataDir = makeDataDir();
    const first = startJobgate(dataDir, ['start'], {}, true);
    await first.waitFor(/initialising a new cluster/);
    // What a terminal does on Ctrl-C: SIGINT to every process of the group, jobgate and initdb,
    // once initdb runs (sent to the group before, it finds no initdb to stop).
    const initdb = await eventually(async () => childNamed(first.child.pid!, 'initdb'), 10_000, 'initdb to run');
    process.kill(first.child.pid!, 'SIGINT');
    process.kill(initdb, 'SIGINT');
    const exit = await first.exited;
    expect(first.stderr()).not.toMatch(/initdb failed|FATAL/);
    expect(first.stderr()).toMatch(/stopped while starting \(SIGINT\)/);
    expect(exit.signal).toBeNull();
    const { jg, url } = await startServing(dataDir);
    expect(await gql(url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });
    expect(await stop(jg)).toEqual({ code: 0, signal: null });
  });

  it.skipIf(process.getuid?.() !== 0)(
    'as root, keeps the cluster where the postgres OS user can reach it when the data folder sits under a 0700 directory',
    async () => {
      const privateHome = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-home-'));
      fs.chmodSync(privateHome, 0o700);
      dirs.push(privateHome);
      const dataDir = path.join(privateHome, 'repo', '.jobgate');
      const { jg, url } = await startServing(dataDir);
      const moved = /keeping the cluster in (\/var\/tmp\/jobgate-pg-[0-9a-f]+) instead/.exec(jg.stderr());
      expect(moved, jg.stderr()).not.toBeNull();
      dirs.push(moved![1]!);
      expect(jg.stderr()).toContain(`blocked by ${privateHome} (mode 700)`);
      expect(fs.existsSync(path.join(moved![1]!, 'PG_VERSION'))).toBe(true);
      expect(await gql(url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });
      expect(await stop(jg)).toEqual({ code: 0, signal: null });
    },
  );

  it.each(['migrate', 'keys create --role VIEWER'])(
    'a SIGTERM during `jobgate %s` on the embedded Postgres stops that Postgres and fails the command',
    async (command) => {
      const dataDir = makeDataDir();
      const jg = startJobgate(dataDir, command.split(' '));
      // The moment its postgres runs (initdb first: it is a first start), before the command is done.
      const postmaster = `-D ${path.join(dataDir, 'pg')} `;
      await waitUntil('postgres runs', () => processesMentioning(postmaster).length > 0, START_TIMEOUT);
      jg.child.kill('SIGTERM');
      expect(await jg.exited).toEqual({ code: 1, signal: null });
      expect(jg.stderr()).toContain('interrupted (SIGTERM)');
      expect(processesMentioning(postmaster)).toEqual([]);
      expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
    },
  );

  describe('a stale jobgate.pid does not block a start', () => {
    it.each([
      [
        'a dead pid',
        async () => {
          const gone = spawn('true');
          await new Promise((r) => gone.once('exit', r));
          return { pid: gone.pid!, release: () => {} };
        },
      ],
      [
        'a live process that is not jobgate',
        async () => {
          const other = spawn('sleep', ['60'], { stdio: 'ignore' });
          await new Promise((r) => other.once('spawn', r));
          return { pid: other.pid!, release: () => void other.kill('SIGKILL') };
        },
      ],
    ])('when it names %s', async (_what, holder) => {
      const dataDir = makeDataDir();
      const { pid, release } = await holder();
      try {
        fs.writeFileSync(path.join(dataDir, 'jobgate.pid'), `${pid}\n`);
        const { jg, url } = await startServing(dataDir);
        expect(fs.readFileSync(path.join(dataDir, 'jobgate.pid'), 'utf8').trim()).toBe(String(jg.pid));
        expect(await gql(url, '{ workspace { slug } }')).toEqual({ workspace: { slug: 'default' } });
        expect(await stop(jg)).toEqual({ code: 0, signal: null });
        expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
      } finally {
        release();
      }
    });
  });
});

describe('startEmbeddedPostgres on a port another Postgres already serves', { timeout: 2 * START_TIMEOUT }, () => {
  it('fails quoting the bind error instead of taking the other server for its own', async () => {
    // The other server lets anyone in from 127.0.0.1 without a password, as many development
    // servers (and Docker images with POSTGRES_HOST_AUTH_METHOD=trust) do.
    const log = createLogger('silent');
    const other = await startEmbeddedPostgres({ dataDir: makeDataDir(), log, ephemeral: true });
    stopLater.push(() => other.stop());
    fs.writeFileSync(path.join(other.clusterDir, 'pg_hba.conf'), 'host all all 127.0.0.1/32 trust\n');
    const admin = new pg.Client({ connectionString: other.connectionString });
    await admin.connect();
    await admin.query('select pg_reload_conf()');
    await admin.end();

    const dataDir = makeDataDir();
    const started = startEmbeddedPostgres({ dataDir, port: other.port, log, ephemeral: true });
    // Were it to resolve, stop it too, so the assertion below fails without leaving a server.
    void started.then(
      (s) => stopLater.push(() => s.stop()),
      () => {},
    );
    await expect(started).rejects.toThrow(/exited during start[\s\S]*Address already in use/);
    // Nothing was created on the other server, and the folder is free for a next start.
    const check = new pg.Client({ connectionString: other.connectionString });
    await check.connect();
    const { rows } = await check.query(`select count(*)::int as n from pg_database where datname = 'jobgate'`);
    await check.end();
    expect(rows[0].n).toBe(0);
    expect(fs.existsSync(path.join(dataDir, 'jobgate.pid'))).toBe(false);
  });
});

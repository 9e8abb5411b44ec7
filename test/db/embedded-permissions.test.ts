/**
 * A new user's first `jobgate start` on the embedded default, wherever their clone sits: as root
 * under a 0700 folder (root's home, any `mktemp -d`), as root under a 0755 one, and as an
 * ordinary user. Each case is a real clone (the sources beside a hard-linked node_modules, so
 * every path a 0700 parent hides is really hidden) and a real CLI child process.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const READY = /gateway: GraphQL and GraphiQL at (http:\/\/\S+)/;
const FALLBACK = /keeping the cluster in (\S+) instead/;
const asRoot = process.getuid?.() === 0;
const TEST_USER = 'jobgate-tester';

/**
 * A start's budget: initdb and the migrations, seconds on an idle machine and most of a
 * minute on a loaded 2-core one. Each test's timeout covers its starts.
 */
const START_MS = 90_000;

const children = new Set<ChildProcess>();
/** The process group each start leads: what it leaves running is killed after its test. */
const groups = new Set<number>();
/** Clusters a start ran (or may have left running): their data folders. */
const clusters = new Set<string>();
const cleanup: (() => void)[] = [];

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

afterEach(async () => {
  // Each start leads a process group: kill every group, so nothing a start left behind (a
  // process of its own, or one whose parent already exited) outlives its test.
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  groups.clear();
  await Promise.all(
    [...children].map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(undefined) : c.once('exit', r)))),
  );
  children.clear();
  // Postgres runs in a process group of its own and outlives a killed jobgate: stop it too.
  for (const dataDir of [...clusters]) {
    clusters.delete(dataDir);
    let pid: number | undefined;
    try {
      pid = Number.parseInt(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]!, 10);
    } catch {
      continue;
    }
    if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) continue;
    process.kill(pid, 'SIGQUIT');
    for (const until = Date.now() + 10_000; isAlive(pid) && Date.now() < until;) await new Promise((r) => setTimeout(r, 50));
  }
  for (const step of cleanup.splice(0).reverse()) {
    try {
      step();
    } catch {
      // best effort: a temporary folder
    }
  }
});

interface OsUser {
  uid: number;
  gid: number;
}

/** An ordinary OS user to run as (root can create one); as a non-root runner, oneself. */
function ordinaryUser(): OsUser | undefined {
  if (!asRoot) return undefined;
  const id = (flag: string) =>
    Number(execFileSync('id', [flag, TEST_USER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', TEST_USER]);
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * A clone of the working tree at `<parent>/<name>`, `parent` created with `mode` (and owned by
 * `owner`, when given). node_modules is hard-linked: the same files, reachable only through the
 * clone's own path, as after `npm install` there.
 */
function makeClone(mode: number, name: string, owner?: OsUser): string {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-clone-'));
  cleanup.push(() => fs.rmSync(parent, { recursive: true, force: true }));
  fs.chmodSync(parent, mode);
  const clone = path.join(parent, name);
  fs.mkdirSync(clone);
  // The build too: `npm install` in a clone makes it (`prepare`), and `npm start` runs it.
  for (const entry of ['package.json', 'tsconfig.json', 'src', 'migrations', 'bin', 'dist']) {
    fs.cpSync(path.join(ROOT, entry), path.join(clone, entry), { recursive: true });
  }
  try {
    execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), clone]);
  } catch {
    // Another file system: a real copy hides the same way.
    fs.cpSync(path.join(ROOT, 'node_modules'), path.join(clone, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  }
  if (owner) {
    fs.chownSync(parent, owner.uid, owner.gid);
    fs.chownSync(clone, owner.uid, owner.gid);
  }
  return clone;
}

interface Started {
  url: string;
  stderr: () => string;
  stop: () => Promise<number | null>;
}

/** `jobgate start` in `clone` as a new user runs it: no DATABASE_URL, the default data folder. */
async function startIn(clone: string, user?: OsUser): Promise<Started> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    JOBGATE_LOG_LEVEL: 'info',
    JOBGATE_LOG_FORMAT: 'pretty',
    HOME: path.dirname(clone),
  };
  for (const name of ['DATABASE_URL', 'TEST_DATABASE_URL', 'JOBGATE_DATA_DIR', 'JOBGATE_EMBEDDED_PORT', 'HOST', 'NODE_OPTIONS']) {
    delete env[name];
  }
  // What `npm start` runs once the build is fresh (the process test group builds it first).
  const child = spawn(process.execPath, [path.join(clone, 'bin', 'jobgate.mjs'), 'start'], {
    cwd: clone,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
    ...(user ?? {}),
  });
  children.add(child);
  groups.add(child.pid!);
  clusters.add(path.join(clone, '.jobgate', 'pg'));
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  const closed = new Promise<number | null>((resolve) =>
    child.once('close', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`jobgate did not serve within ${START_MS} ms:\n${stderr}`)), START_MS);
    child.stderr!.on('data', (chunk: string) => {
      stderr += chunk;
      const dataDir = /data in (.+?); log in/.exec(stderr)?.[1];
      if (dataDir) clusters.add(dataDir);
      const ready = READY.exec(stderr);
      if (ready) {
        clearTimeout(timer);
        resolve(ready[1]!);
      }
    });
    void closed.then((code) => {
      clearTimeout(timer);
      reject(new Error(`jobgate exited (code ${code}) before serving:\n${stderr}`));
    });
  });
  // The cluster may have moved out of the clone's reach: remove it with the test.
  const fallback = FALLBACK.exec(stderr)?.[1];
  if (fallback) cleanup.push(() => fs.rmSync(fallback, { recursive: true, force: true }));
  return {
    url,
    stderr: () => stderr,
    stop: async () => {
      child.kill('SIGTERM');
      return closed;
    },
  };
}

/**
 * Through GraphQL with the ADMIN key the first start saved: a write (unless `readOnly`) and a
 * read that sees it. The database works, and keeps what an earlier start wrote.
 */
async function usesTheDatabase(clone: string, url: string, readOnly = false): Promise<void> {
  const key = fs.readFileSync(path.join(clone, '.jobgate', 'admin-key'), 'utf8').trim();
  const gql = async (query: string) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query }),
    });
    const body = (await res.json()) as { data?: any; errors?: unknown };
    expect(body.errors).toBeUndefined();
    return body.data;
  };
  if (!readOnly) await gql('mutation { setConfig(input: { name: "first.config", entries: [{ key: "region", value: "eu" }] }) { name } }');
  const data = await gql('{ configs { nodes { name } } }');
  expect(data.configs.nodes).toEqual([{ name: 'first.config' }]);
}

/** The postmaster serving this start: its executable and the uid it runs as. */
function postmasterOf(stderr: string): { exe: string; uid: number } {
  const dataDir = /data in (.+?); log in/.exec(stderr)?.[1];
  expect(dataDir).toBeDefined();
  const pid = Number.parseInt(fs.readFileSync(path.join(dataDir!, 'postmaster.pid'), 'utf8').split('\n')[0]!, 10);
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return { exe: fs.readlinkSync(`/proc/${pid}/exe`), uid: Number(/^Uid:\s+(\d+)/m.exec(status)![1]) };
}

const NAME = 'my clone — café';

describe('the embedded default on a fresh clone', { timeout: 2 * START_MS + 30_000 }, () => {
  it.skipIf(!asRoot)(
    'starts as root under a 0700 folder whose path has spaces and non-ASCII, with Postgres run from binaries its user can reach',
    async () => {
      const clone = makeClone(0o700, NAME);
      const jg = await startIn(clone);
      await usesTheDatabase(clone, jg.url);
      const postmaster = postmasterOf(jg.stderr());
      // Postgres runs as the postgres OS user, from a copy outside the unreachable clone.
      expect(postmaster.uid).not.toBe(0);
      expect(postmaster.exe.startsWith(clone)).toBe(false);
      expect(await jg.stop()).toBe(0);
      // The copy is reused: a second start copies nothing and serves the same data.
      const again = await startIn(clone);
      expect(again.stderr()).not.toMatch(/copying them/);
      await usesTheDatabase(clone, again.url, true);
      expect(await again.stop()).toBe(0);
    },
  );

  it.skipIf(!asRoot)('starts as root under a 0755 folder, keeping the cluster in the clone', async () => {
    const clone = makeClone(0o755, NAME);
    const jg = await startIn(clone);
    await usesTheDatabase(clone, jg.url);
    expect(jg.stderr()).not.toMatch(FALLBACK);
    expect(fs.existsSync(path.join(clone, '.jobgate', 'pg', 'PG_VERSION'))).toBe(true);
    expect(postmasterOf(jg.stderr()).exe.startsWith(clone)).toBe(true);
    expect(await jg.stop()).toBe(0);
  });

  it("starts as an ordinary user under that user's own 0700 folder", async () => {
    const user = ordinaryUser();
    const clone = makeClone(0o700, NAME, user);
    const jg = await startIn(clone, user);
    await usesTheDatabase(clone, jg.url);
    const postmaster = postmasterOf(jg.stderr());
    expect(postmaster.uid).toBe(user?.uid ?? process.getuid!());
    expect(postmaster.exe.startsWith(clone)).toBe(true);
    expect(await jg.stop()).toBe(0);
  });
});

/**
 * What the embedded default leaves on disk, found from the data folder alone: where its cluster
 * is, whether a jobgate process or a Postgres is using it, the URL of the running server, and its
 * removal. The CLI's `reset` and `db url` read it without starting anything; `embedded.ts`, which
 * starts the server, shares its lock and orphan handling.
 *
 * The cluster is `dataDir/pg`, or, for a root user whose `postgres` OS user cannot reach the data
 * folder, `fallbackClusterDir(dataDir)` under /var/tmp (see embedded.ts `clusterDirFor`). Both are
 * looked at: the folder may have been reachable at one start and not at another.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { EmbeddedPostgresError, FALLBACK_ROOT } from './embedded-os.js';

/**
 * The files jobgate writes in the data folder (embedded.ts and app.ts), and the cluster's folder
 * with its staging siblings. `reset` removes these by name and the folder only if that leaves it
 * empty: JOBGATE_DATA_DIR may name a folder that holds other things.
 */
const DATA_FILES = [
  'jobgate.pid',
  'jobgate.pid.takeover',
  'postgres.log',
  'postgres-credentials.json',
  'secret-key',
  'admin-key',
  'pg',
  'pg.init',
  'pg.initpw',
];

/** The name of the database jobgate creates and uses on the embedded server (src/db/connect.ts). */
export const EMBEDDED_DATABASE = 'jobgate';

/** Where a root user's cluster goes when the `postgres` OS user cannot reach `dataDir`. */
export function fallbackClusterDir(dataDir: string): string {
  const hash = createHash('sha256').update(dataDir).digest('hex').slice(0, 12);
  return path.join(FALLBACK_ROOT, `jobgate-pg-${hash}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function commandLineOf(pid: number): string | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return undefined;
  }
}

/** The pid recorded in a lock file, if that process still runs and looks like the recorder. */
export function liveHolder(file: string, looksLike: RegExp): number | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(fs.readFileSync(file, 'utf8').split('\n')[0] ?? '', 10);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || !isAlive(pid)) return undefined;
  const cmd = commandLineOf(pid);
  // No /proc (not Linux): trust the pid.
  if (cmd !== undefined && !looksLike.test(cmd)) return undefined;
  return pid;
}

async function waitForExit(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!isAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return !isAlive(pid);
}

/** Stops a Postgres left running by a jobgate process that was killed without cleaning up. */
export async function recoverOrphan(clusterDir: string, log: Logger): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  // Only a postgres serving this very cluster: after a reboot the pid may belong to another server.
  const escaped = clusterDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const orphan = liveHolder(pidFile, new RegExp(`postgres.*-D ${escaped}( |$)`));
  if (orphan === undefined) {
    // The recorded server is gone (or the pid now belongs to something else): the file is stale.
    // Postgres would refuse to start over a pid that is alive but not its own, so clear it.
    fs.rmSync(pidFile, { force: true });
    log.info('embedded postgres: removed a stale postmaster.pid');
    return;
  }
  log.warn(`embedded postgres: stopping postgres pid ${orphan}, left running by a jobgate process that did not exit cleanly`);
  process.kill(orphan, 'SIGINT');
  if (await waitForExit(orphan, 20_000)) return;
  process.kill(orphan, 'SIGQUIT');
  if (!(await waitForExit(orphan, 10_000))) {
    throw new EmbeddedPostgresError(`postgres pid ${orphan} (an earlier run's) would not stop; stop it by hand`);
  }
}

/** The Postgres serving `clusterDir`, from its postmaster.pid, if it runs: pid and port. */
function runningServer(clusterDir: string): { pid: number; port: number } | undefined {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  const escaped = clusterDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pid = liveHolder(pidFile, new RegExp(`postgres.*-D ${escaped}( |$)`));
  if (pid === undefined) return undefined;
  // postmaster.pid: pid, data directory, start time, port, ... one per line.
  const port = Number.parseInt(fs.readFileSync(pidFile, 'utf8').split('\n')[3] ?? '', 10);
  return Number.isInteger(port) && port > 0 ? { pid, port } : undefined;
}

export interface EmbeddedState {
  dataDir: string;
  /** The clusters that exist for this data folder (normally one). */
  clusterDirs: string[];
  /** What removing it would remove, existing paths only. */
  paths: string[];
  /** The pid of the jobgate process that holds the data folder's lock, if it runs. */
  holder: number | undefined;
  /** The Postgres serving one of its clusters, if one runs. */
  server: { pid: number; port: number; clusterDir: string } | undefined;
}

/** What the embedded default has in `dataDir`, and who uses it; starts and changes nothing. */
export function embeddedState(dataDir: string): EmbeddedState {
  const dir = path.resolve(dataDir);
  const clusters = [path.join(dir, 'pg'), fallbackClusterDir(dir)];
  const clusterDirs = clusters.filter((c) => fs.existsSync(c));
  const candidates = [...DATA_FILES.map((f) => path.join(dir, f)), ...clusters.slice(1).flatMap((c) => [c, `${c}.init`, `${c}.initpw`])];
  let server: EmbeddedState['server'];
  for (const clusterDir of clusterDirs) {
    const running = runningServer(clusterDir);
    if (running) server = { ...running, clusterDir };
  }
  return {
    dataDir: dir,
    clusterDirs,
    paths: candidates.filter((p) => fs.existsSync(p)),
    holder: liveHolder(path.join(dir, 'jobgate.pid'), /node|jobgate|tsx/),
    server,
  };
}

/**
 * The URL of the `jobgate` database on the running embedded server (its port changes at every
 * start unless JOBGATE_EMBEDDED_PORT pins it). Throws EmbeddedPostgresError, saying what to do,
 * when none runs or its credentials are missing.
 */
export function embeddedUrl(dataDir: string): string {
  const state = embeddedState(dataDir);
  if (!state.server || state.holder === undefined) {
    throw new EmbeddedPostgresError(
      `the embedded Postgres of ${state.dataDir} is not running: start jobgate (npm start) first; ` +
        'its port changes at every start unless JOBGATE_EMBEDDED_PORT pins it',
    );
  }
  let credentials: { user: string; password: string };
  try {
    credentials = JSON.parse(fs.readFileSync(path.join(state.dataDir, 'postgres-credentials.json'), 'utf8')) as typeof credentials;
  } catch (error) {
    throw new EmbeddedPostgresError(`cannot read ${path.join(state.dataDir, 'postgres-credentials.json')}`, { cause: error });
  }
  const enc = encodeURIComponent;
  return `postgres://${enc(credentials.user)}:${enc(credentials.password)}@127.0.0.1:${state.server.port}/${EMBEDDED_DATABASE}`;
}

/**
 * Removes the embedded default's data: the cluster wherever it lives, its credentials, log, keys.
 * Refused (EmbeddedPostgresError) while a jobgate process holds the folder; a Postgres left
 * running by a jobgate process that was killed is stopped first. Returns what it removed.
 */
export async function removeEmbeddedData(dataDir: string, log: Logger): Promise<string[]> {
  const state = embeddedState(dataDir);
  if (state.holder !== undefined) {
    throw new EmbeddedPostgresError(
      `a jobgate process (pid ${state.holder}) is running on the embedded Postgres in ${state.dataDir}: stop it first`,
    );
  }
  for (const clusterDir of state.clusterDirs) await recoverOrphan(clusterDir, log);
  for (const p of state.paths) fs.rmSync(p, { recursive: true, force: true });
  try {
    if (fs.readdirSync(state.dataDir).length === 0) fs.rmdirSync(state.dataDir);
  } catch {
    // Not there, or not empty: what is left is not ours.
  }
  return state.paths;
}

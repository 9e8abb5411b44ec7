/**
 * A primary and a streaming replica of it (Debian's PostgreSQL server binaries: initdb, pg_ctl,
 * pg_basebackup), each a small cluster of its own in a temporary folder, for the read replica's
 * tests. The replica is a `pg_basebackup -R` of the primary: it streams the primary's WAL, and its
 * replay can be paused to make it lag.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, appendFileSync, chownSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { track, untrack } from './tracked.js';

const run = promisify(execFile);

/** Where the server binaries are: JOBGATE_PG_BINDIR, else the newest /usr/lib/postgresql/<version>/bin. */
export function postgresBinDir(): string | undefined {
  if (process.env.JOBGATE_PG_BINDIR) return process.env.JOBGATE_PG_BINDIR;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'pg_basebackup')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], 'bin') : undefined;
}

export interface ReplicatedPostgres {
  primaryUrl(database: string): string;
  replicaUrl(database: string): string;
  primaryPort: number;
  replicaPort: number;
  /** Stops applying the primary's changes on the replica (it keeps receiving them). */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Stops the primary: `immediate` is a crash (no shutdown checkpoint, nothing more sent to the replica). */
  stopPrimary(mode: 'fast' | 'immediate'): Promise<void>;
  /** Promotes the replica to a primary; resolves once it accepts writes. */
  promote(): Promise<void>;
  stop(): Promise<void>;
}

export interface ReplicationOptions {
  /**
   * Synchronous replication: a commit is acknowledged to its client only once the replica has
   * flushed it, so a crash of the primary loses no acknowledged commit (what a failover that
   * loses nothing needs). Default false: asynchronous, as most replicas run.
   */
  synchronous?: boolean;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startReplicatedPostgres(options: ReplicationOptions = {}): Promise<ReplicatedPostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("no PostgreSQL server binaries (pg_basebackup): install Debian's postgresql package, or set JOBGATE_PG_BINDIR");
  const dir = mkdtempSync(path.join(os.tmpdir(), 'jobgate-replica-'));
  // Postgres refuses to run as root: as root, its programs run as the `postgres` OS user.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout: uid } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(uid), Number(gid));
  }
  const pgRun = (program: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', path.join(bin, program), ...args]) : run(path.join(bin, program), args);
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const primary = path.join(dir, 'primary');
  const replica = path.join(dir, 'replica');
  const started: string[] = [];
  const stop = async () => {
    for (const data of started.splice(0).reverse()) await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await pgRun('initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    appendFileSync(
      path.join(primary, 'postgresql.conf'),
      [
        `port = ${primaryPort}`,
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${dir}'`,
        'wal_level = replica',
        'max_wal_senders = 4',
        'fsync = off',
        'max_connections = 50',
        // '*': whichever standby connects (the one replica) confirms each commit.
        ...(options.synchronous ? ["synchronous_standby_names = '*'"] : []),
        '',
      ].join('\n'),
    );
    await pgRun('pg_ctl', ['-D', primary, '-l', path.join(dir, 'primary.log'), '-w', 'start']);
    started.push(primary);
    await pgRun('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', replica, '-R', '-X', 'stream']);
    // The copied configuration names the primary's port; the last setting of a name wins. Once
    // promoted, the replica has no standby of its own to wait for.
    appendFileSync(path.join(replica, 'postgresql.conf'), `port = ${replicaPort}\nhot_standby = on\nsynchronous_standby_names = ''\n`);
    await pgRun('pg_ctl', ['-D', replica, '-l', path.join(dir, 'replica.log'), '-w', 'start']);
    started.push(replica);
  } catch (error) {
    await stop();
    throw error;
  }
  const url = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const onReplica = async (sql: string) => {
    const client = new pg.Client({ connectionString: url(replicaPort, 'postgres') });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  const pair: ReplicatedPostgres = {
    primaryUrl: (database) => url(primaryPort, database),
    replicaUrl: (database) => url(replicaPort, database),
    primaryPort,
    replicaPort,
    pauseReplay: () => onReplica('select pg_wal_replay_pause()'),
    resumeReplay: () => onReplica('select pg_wal_replay_resume()'),
    async stopPrimary(mode) {
      await pgRun('pg_ctl', ['-D', primary, '-m', mode, '-w', 'stop']);
      started.splice(started.indexOf(primary), 1);
    },
    async promote() {
      // -w: pg_ctl returns once the server has left recovery and accepts writes.
      await pgRun('pg_ctl', ['-D', replica, '-w', 'promote']);
    },
    async stop() {
      await stop();
      untrack(pair);
    },
  };
  track(pair, `replicated postgres in ${dir} (stop() it)`);
  return pair;
}

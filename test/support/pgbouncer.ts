/**
 * A real PgBouncer (Debian's `pgbouncer` package) in front of the test's Postgres, in transaction
 * pooling mode with few server connections, so consecutive transactions of one client land on
 * different server connections and several clients share one, as in production.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { track, untrack } from './tracked.js';

export const PGBOUNCER = process.env.JOBGATE_PGBOUNCER ?? '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** A connection string to `database` through the pooler. */
  url(database: string): string;
  /** The pooler's log so far (for a failing test's message). */
  log(): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts PgBouncer in front of the server at `serverUrl`; `poolSize` server connections per database and user. */
export async function startPgBouncer(
  serverUrl: string,
  options: { poolSize?: number; ignoreStartupParameters?: string } = {},
): Promise<PgBouncer> {
  if (!existsSync(PGBOUNCER)) throw new Error(`no PgBouncer at ${PGBOUNCER}: install Debian's package (apt-get install -y pgbouncer)`);
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'jobgate-pgbouncer-'));
  const port = await freePort();
  const target = [`host=${server.hostname}`, `port=${server.port || 5432}`, `user=${user}`];
  if (server.password) target.push(`password=${decodeURIComponent(server.password)}`);
  writeFileSync(path.join(dir, 'users.txt'), `"${user}" ""\n`);
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = ${target.join(' ')}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 2}`,
      'max_client_conn = 500',
      // pg sends none of these by default; a client that does must not be refused.
      // PgBouncer's own default is extra_float_digits alone; a test of that passes it.
      `ignore_startup_parameters = ${options.ignoreStartupParameters ?? 'extra_float_digits,options'}`,
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root: as root, it runs as the `postgres` OS user (-u).
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    for (const f of ['', 'users.txt', 'pgbouncer.ini']) chownSync(path.join(dir, f), uid, gid);
  }
  const args = [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = spawn(PGBOUNCER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout!.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-20_000)));
  child.stderr!.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-20_000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  const url = (database: string) => {
    const u = new URL(serverUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    u.pathname = `/${database}`;
    return u.toString();
  };
  // Ready when a query goes through it.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url('postgres'), connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      break;
    } catch (error) {
      await client.end().catch(() => {});
      if (child.exitCode !== null || Date.now() > deadline) {
        await stop();
        throw new Error(`PgBouncer did not start: ${(error as Error).message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const bouncer: PgBouncer = {
    url,
    log: () => log,
    async stop() {
      await stop();
      untrack(bouncer);
    },
  };
  track(bouncer, `pgbouncer on port ${port} (stop() it)`);
  return bouncer;
}

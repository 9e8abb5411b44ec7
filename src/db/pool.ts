import { atMostEvery } from '../log.js';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { pgTypes } from './pg-types.js';
import type { DB } from './types.js';

export type Db = Kysely<DB>;

export interface Database {
  pool: pg.Pool;
  db: Db;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  connectionString: string;
  max?: number;
  applicationName?: string;
  /** Longest wait for a connection (a new one, or a free one from the pool). Default 30 s. */
  connectionTimeoutMs?: number;
  /**
   * Whether named statements are prepared once per connection and reused (default true). Off
   * through a transaction-mode pooler that does not track them (see `unnamedStatementClient`).
   */
  preparedStatements?: boolean;
  /** Whether the server takes startup parameters (default true; not a transaction pooler: ./pooler.ts). */
  startupOptions?: boolean;
}

/**
 * A client that sends every statement unnamed. A named statement is prepared once per server
 * connection and pg remembers, per client, which names it prepared. Through a transaction-mode
 * pooler (PgBouncer before 1.21, or later ones without max_prepared_statements) a client's
 * statements land on whichever server connection is free: one client finds its name already
 * prepared there by another ("prepared statement ... already exists"), another finds it missing
 * ("... does not exist"), and claims and outcomes fail. Unnamed, each statement is parsed and
 * planned where it runs, at the cost of planning it every time.
 */
class UnnamedStatementClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    const query = this.query.bind(this) as (...args: unknown[]) => unknown;
    (this as { query: unknown }).query = (config: unknown, ...rest: unknown[]) => {
      if (config !== null && typeof config === 'object' && 'name' in config) {
        const { name: _name, ...unnamed } = config as { name?: string };
        return query(unnamed, ...rest);
      }
      return query(config, ...rest);
    };
  }
}

/**
 * Whether the pool's connections turn JIT compilation off. jobgate's statements are short and
 * run often; their plans' estimated costs grow with the tables' statistics, past jit_above_cost
 * once the tables are analyzed (as autovacuum does), and then each run is compiled first: the
 * claim of 50 due executions took 47 ms with JIT (Postgres' default) and 10 ms without, on
 * 20,000 analyzed executions. Not through a pooler (PgBouncer refuses the startup parameter:
 * there the limited claims and the metrics read still turn it off per transaction), nor when
 * the URL sets `options` itself.
 */
export function jitOff(options: Pick<DatabaseOptions, 'connectionString' | 'preparedStatements' | 'startupOptions'>): boolean {
  return options.startupOptions !== false && options.preparedStatements !== false && !/[?&]options=/.test(options.connectionString);
}

/**
 * How often a pool says that its connections fail. An outage ends every connection at once, and
 * each one's error came twice (on the client, then on the pool): through PgBouncer, 836 lines in
 * 70 s. The outage itself is said by whoever waits for the database
 * (src/service/engine/runtime/availability.ts); these lines are its detail.
 */
const ERROR_LINE_MS = 10_000;

/** One pg pool and the Kysely instance over it. Connection errors are logged, never fatal. */
export function createDatabase(options: DatabaseOptions, log: (msg: string) => void = () => {}): Database {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'jobgate',
    // This pool's own parsers (int8 as a number), not pg's process-wide ones: see pg-types.ts.
    types: pgTypes,
    // A server that vanished without closing (a crashed host, a failover) never answers:
    // without keepalive a query waits forever, its client is never returned, and once all are
    // held every caller queues forever, silently. With it a client waiting on a reply finds the
    // dead peer in about 20 s (10 s idle, then libuv's 10 probes a second apart); a query whose
    // bytes were never acknowledged is bounded by TCP retransmission (tcp_retries2, ~15 min).
    // Meanwhile the bounded wait for a client turns a held pool into errors that every loop
    // logs and retries, instead of a queue that only grows.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 30_000,
    ...(options.preparedStatements === false ? { Client: UnnamedStatementClient } : {}),
    ...(jitOff(options) ? { options: '-c jit=off' } : {}),
  });
  // A client whose server went away (a restart, a terminated backend, a cut network) emits
  // 'error': on the pool while it is idle, and on the client itself while it is checked out
  // between queries (a transaction in progress). Without a listener either one is an uncaught
  // exception that ends the process; with one, the query in flight fails, the client is not
  // queryable any more and the pool drops it on release.
  const say = atMostEvery(ERROR_LINE_MS, log);
  pool.on('error', (error) => say(`postgres pool: idle client error: ${error.message}`));
  // pg's pool.end() resolves once it has asked each connection to end, not once they have:
  // close() waits for the sockets, so a server stopped right after (the embedded one, at
  // shutdown) finds no connection of ours to terminate.
  const open = new Set<pg.PoolClient>();
  pool.on('connect', (client) => {
    open.add(client);
    client.on('end', () => open.delete(client));
    client.on('error', (error) => say(`postgres pool: client error: ${error.message}`));
  });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  let closed = false;
  return {
    pool,
    db,
    async close() {
      if (closed) return;
      closed = true;
      await db.destroy();
      // Kysely ends the pool only if it ran a query; a pool used only directly is ended here.
      if (!pool.ending) await pool.end();
      await Promise.all(
        [...open].map((client) => new Promise<void>((resolve) => (open.has(client) ? client.once('end', () => resolve()) : resolve()))),
      );
    },
  };
}

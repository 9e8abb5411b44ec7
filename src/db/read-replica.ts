/**
 * A streaming replica for reads that may be slightly stale (lists, counts, stats), with a bound on
 * how stale.
 *
 * How stale the replica is, is measured, not guessed: every `probeMs` the primary's WAL position
 * is read (and kept with the time it was read), then the replica's replay position. The replica
 * holds every commit made before the latest time whose position it has replayed: its staleness is
 * now minus that time. A quiet primary writes nothing, so a caught-up replica stays fresh; a
 * replica that stopped replaying (or cannot be reached) grows stale by the clock, and past
 * `maxLagMs` reads go to the primary until it catches up again.
 */
import { createDatabase, type Database, type Db } from './pool.js';
import type pg from 'pg';

export interface ReadReplicaOptions {
  /** The replica's connection string. */
  connectionString: string;
  /** The primary's pool, for its WAL position. */
  primary: pg.Pool;
  /** Reads go to the replica only while it holds every commit older than this. */
  maxLagMs: number;
  /** How often the positions are compared. Default 250 ms. */
  probeMs?: number;
  poolMax?: number;
  preparedStatements?: boolean;
  /** Whether the replica's address takes startup parameters (not a transaction pooler). */
  startupOptions?: boolean;
  log?: (message: string) => void;
}

export interface ReadReplica {
  db: Db;
  /** Whether the replica holds every commit older than `maxLagMs` now. */
  fresh(): boolean;
  /** How far behind the primary's commits the replica may be, in ms; undefined before the first comparison. */
  stalenessMs(): number | undefined;
  close(): Promise<void>;
}

export function openReadReplica(options: ReadReplicaOptions): ReadReplica {
  const probeMs = options.probeMs ?? 250;
  const log = options.log ?? (() => {});
  const database: Database = createDatabase(
    {
      connectionString: options.connectionString,
      max: options.poolMax ?? 10,
      applicationName: 'jobgate-read',
      preparedStatements: options.preparedStatements,
      startupOptions: options.startupOptions,
      connectionTimeoutMs: 5_000,
    },
    log,
  );
  // Positions of the primary, oldest first, with when each was read (ms, this process's clock).
  const samples: { at: number; lsn: string }[] = [];
  let freshAsOf: number | undefined;
  let failing = false;
  let closed = false;

  async function probe(): Promise<void> {
    const at = Date.now();
    const { rows } = await options.primary.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
    samples.push({ at, lsn: rows[0]!.lsn });
    // Which of the samples the replica has replayed, compared by Postgres itself (pg_lsn order).
    const { rows: replayed } = await database.pool.query<{ i: number }>(
      `select max(i)::int as i from unnest($1::pg_lsn[]) with ordinality as s(lsn, i)
       where s.lsn <= coalesce(pg_last_wal_replay_lsn(), pg_current_wal_lsn())`,
      [samples.map((s) => s.lsn)],
    );
    const i = replayed[0]?.i;
    if (i != null) {
      freshAsOf = samples[i - 1]!.at;
      samples.splice(0, i - 1);
    }
    // Samples older than the bound can no longer make the replica fresh enough: drop all but one.
    while (samples.length > 1 && samples[1]!.at < Date.now() - options.maxLagMs) samples.shift();
  }

  let timer: NodeJS.Timeout | undefined;
  const loop = async () => {
    try {
      await probe();
      if (failing) log('read replica: answering again');
      failing = false;
    } catch (error) {
      if (!failing) log(`read replica: cannot compare positions (${(error as Error).message}); reads go to the primary`);
      failing = true;
    }
    if (!closed) timer = setTimeout(() => void loop(), probeMs).unref();
  };
  void loop();

  const stalenessMs = () => (freshAsOf === undefined ? undefined : Date.now() - freshAsOf);
  return {
    db: database.db,
    fresh() {
      const staleness = stalenessMs();
      return staleness !== undefined && staleness <= options.maxLagMs;
    },
    stalenessMs,
    async close() {
      closed = true;
      clearTimeout(timer);
      await database.close();
    },
  };
}

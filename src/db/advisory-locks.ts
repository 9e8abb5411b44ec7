/**
 * Every advisory lock jobgate takes, in one place. Postgres has one advisory lock space per
 * database: two uses that pick the same keys wait on each other (or, with a try-lock, skip work)
 * for no reason. Each two-key use has a class of its own (the first key; the second is a hash of
 * what it locks), and each one-key (bigint) use a key of its own; the two forms never meet (they
 * differ in pg_locks.objsubid). test/db/advisory-locks.test.ts keeps them distinct, and keeps these
 * numbers out of every other file.
 */

/** Two-key locks: (class, hashtext(what)). */
export const LOCK_CLASS = Object.freeze({
  /** A limited endpoint's claims (src/db/statements/claim-limited.ts), keyed by the endpoint. */
  endpointClaims: 714302051,
  /** A capped workspace's claims (src/db/statements/claim-limited.ts), keyed by the workspace. */
  workspaceClaims: 714302052,
  /** Schedule declarations (src/db/repositories/declared-schedules.ts), keyed by the workspace. */
  scheduleDeclarations: 714302053,
  /** Definitions of one typed job (src/db/repositories/payload-specs.ts), keyed by workspace and name. */
  jobDefinitions: 714302054,
  /** Creates with one lock key under THROTTLE or DEBOUNCE (src/db/repositories/executions.ts), keyed by workspace and key. */
  lockKeyTurns: 714302055,
  /**
   * The live events' writer mark (migration 000009: `pg_advisory_xact_lock_shared(27239, 1)`, read
   * from pg_locks by src/db/statements/events.ts and src/db/statements/alert-evaluation.ts); written in SQL there.
   */
  eventWriters: 27239,
});

/** One-key (bigint) locks. */
export const LOCK_KEY = Object.freeze({
  /** Migrations, one process at a time (src/db/migrate.ts). */
  migrations: 7_143_020_511,
  /** The statistics keeper, one at a time (src/db/statements/statistics.ts). */
  statisticsKeeper: 7_143_020_512,
  /** The live events' partitions, kept by one process at a time (src/db/statements/event-partitions.ts). */
  eventPartitions: 7_143_020_513,
});

/**
 * What the operator's adapters read of the database: `/readyz` (the migration version applied
 * against the one this build ships) and the queue and run gauges of `/metrics`. The adapters
 * (src/server, src/metrics) sit above the service and never import src/db; these functions are
 * their one way down.
 */
import type pg from 'pg';
import { readMigrations } from '../../db/migrate.js';
import { appliedMigrationVersion, readClusterSnapshot, type ClusterSnapshot } from '../../db/statements/metrics.js';

export type { ClusterSnapshot, QueueRow } from '../../db/statements/metrics.js';
export type { ListenMode } from '../../db/listener.js';

export interface DatabaseProbes {
  /** The newest migration applied to the database (0 when none). Rejects when the database cannot be reached. */
  appliedMigrationVersion(): Promise<number>;
  /** The newest migration this build ships: the one a ready database has applied. */
  expectedMigrationVersion(): Promise<number>;
  /** The installation's queue per endpoint and its live runs, in one round trip. */
  clusterSnapshot(): Promise<ClusterSnapshot>;
}

export function createDatabaseProbes(pool: pg.Pool): DatabaseProbes {
  let expected: Promise<number> | undefined;
  return {
    appliedMigrationVersion: () => appliedMigrationVersion(pool),
    expectedMigrationVersion: () => (expected ??= readMigrations().then((files) => files.at(-1)?.version ?? 0)),
    clusterSnapshot: () => readClusterSnapshot(pool),
  };
}

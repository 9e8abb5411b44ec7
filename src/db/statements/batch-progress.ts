/**
 * What the live hub reads of batches (src/subscriptions/hub/batch-watches.ts): the batches a
 * `b:<id>` hint named, by id. Every id was authorised for its subscriber's workspace when the
 * subscription opened (src/service/live/live.ts authorizeBatchStream), so the read is by id alone,
 * one statement for every batch hinted at once, as runs are (./events.ts runsById).
 */
import type pg from 'pg';
import type { BatchRow } from '../types.js';

/** Batches by id (the hub re-reads the ones it was told moved). */
export async function batchesById(pool: pg.Pool, ids: readonly string[]): Promise<BatchRow[]> {
  return (await pool.query<BatchRow>(`select * from batches where id = any($1::uuid[])`, [ids])).rows;
}

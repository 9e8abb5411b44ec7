/**
 * The two graphile-worker configurations we compare against, on graphile-worker 0.17:
 *  - default: its defaults (one job fetched per worker slot, each completion its own statement);
 *  - fast: what its performance guide recommends for throughput, a local queue of 100 jobs
 *    fetched in one statement and completions/failures batched (delay 0: every job that
 *    finishes in the same tick shares one statement).
 * Both run `concurrency` jobs at once, the same as jobgate's workers.
 */
import { Logger } from 'graphile-worker';

export type GraphileConfigName = 'default' | 'fast';

export function graphilePreset(config: GraphileConfigName): GraphileConfig.Preset {
  if (config === 'default') return {};
  return { worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };
}

/** Errors only, to stderr. */
export const graphileLogger = new Logger(() => (level, message) => {
  if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
});

/** 20,000 (or `n`) no-op jobs in one statement, through its SQL API. */
export const ADD_NOOP_JOBS = `
select count(*)::int as n from graphile_worker.add_jobs(array(
  select row('noop', '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec
  from generate_series(1, $1::int)))`;

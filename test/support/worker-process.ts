/**
 * A worker in its own process, for tests that kill, stop and resume workers with real signals.
 * Its handler `work` records each run in `side_effects` (on the database clock) and sleeps
 * `input.ms`, ignoring aborts as a handler stuck in a call would.
 *
 * env: DATABASE_URL, WORKER_ID, LEASE_MS, HEARTBEAT_MS, RECONCILE_MS, CONCURRENCY, BATCH_SIZE (default: the
 * concurrency; above it, the worker claims ahead of its slots)
 * Prints "ready" on stdout once it claims work.
 */
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';

const env = (name: string, def?: string) => process.env[name] ?? def ?? '';
const gate = await createJobgate({ databaseUrl: env('DATABASE_URL'), migrate: false, poolMax: 20, log: createLogger('info') });
const workerId = env('WORKER_ID', `pid-${process.pid}`);

gate.handle<{ ms?: number }>('work', async (input, ctx) => {
  const { rows } = await gate.database.pool.query(
    `insert into side_effects (execution_id, worker_id, attempt, started_at) values ($1, $2, $3, clock_timestamp()) returning id`,
    [ctx.executionId, workerId, ctx.attempt],
  );
  await new Promise((r) => setTimeout(r, input.ms ?? 0));
  await gate.database.pool.query(`update side_effects set finished_at = clock_timestamp() where id = $1`, [rows[0].id]);
});

const worker = await gate.startWorker({
  workerId,
  concurrency: Number(env('CONCURRENCY', '10')),
  batchSize: Number(env('BATCH_SIZE', env('CONCURRENCY', '10'))),
  leaseMs: Number(env('LEASE_MS', '30000')),
  heartbeatMs: Number(env('HEARTBEAT_MS', '10000')),
  reconcileMs: Number(env('RECONCILE_MS', '1000')),
  pollMs: 500,
});
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void worker
    .stop({ graceMs: 5000 })
    .then(() => gate.close())
    .then(() => process.exit(0));
});

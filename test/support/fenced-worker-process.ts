/**
 * A worker in its own process whose handler `ledger` writes its domain row in the fenced
 * transaction (ctx.transaction), for tests that stop it with real signals past its lease.
 * Inside the transaction it records, on another connection, that it is inside (`inside`), then
 * sleeps `input.ms` ignoring aborts, or with HOLD=1 waits, ignoring aborts, until it receives
 * SIGUSR2: a test then stops it inside its transaction whenever it likes, rather than having to
 * send its SIGSTOP before a sleep runs out. A refusal of its commit is recorded in `refusals`.
 *
 * env: DATABASE_URL, WORKER_ID, LEASE_MS, HEARTBEAT_MS, RECONCILE_MS, COMPLETE ('1': record the
 * success in the same transaction), HOLD. Prints "ready" once it claims work.
 */
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';

const env = (name: string, def?: string) => process.env[name] ?? def ?? '';
const gate = await createJobgate({ databaseUrl: env('DATABASE_URL'), migrate: false, poolMax: 10, log: createLogger('info') });
const workerId = env('WORKER_ID', `pid-${process.pid}`);
const pool = gate.database.pool;
const hold = env('HOLD') === '1';

gate.handle<{ ms?: number }>('ledger', async (input, ctx) => {
  try {
    await ctx.transaction(
      async (client) => {
        await client.query(`insert into ledger (execution_id, worker_id) values ($1, $2)`, [ctx.executionId, workerId]);
        // Listening before `inside` is written: the test sends SIGUSR2 only once it reads that row.
        const released = hold ? new Promise<void>((r) => process.once('SIGUSR2', () => r())) : undefined;
        await pool.query(`insert into inside (execution_id, worker_id) values ($1, $2)`, [ctx.executionId, workerId]);
        await (released ?? new Promise((r) => setTimeout(r, input.ms ?? 0)));
      },
      { complete: env('COMPLETE') === '1' },
    );
  } catch (error) {
    await pool.query(`insert into refusals (execution_id, worker_id, code) values ($1, $2, $3)`, [
      ctx.executionId,
      workerId,
      (error as { code?: string }).code ?? String(error),
    ]);
    throw error;
  }
});

const worker = await gate.startWorker({
  workerId,
  concurrency: 2,
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

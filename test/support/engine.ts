/**
 * Workers in the test process, over a test database: real claims, real leases, real HTTP.
 */
import { createLogger } from '../../src/log.js';
import { HandlerRegistry, type HandlerFn } from '../../src/service/engine/delivery/handler-registry.js';
import { createWorker, type Worker, type WorkerOptions } from '../../src/service/engine/worker/worker.js';
import { TEST_SECRETS, type TestDb } from './db.js';
import { track, untrack } from './tracked.js';

export interface EngineHarness {
  handlers: HandlerRegistry;
  handle(name: string, fn: HandlerFn<any>): void;
  worker(options?: Partial<WorkerOptions>): Promise<Worker>;
  logs: string[];
  stopAll(): Promise<void>;
}

export function engineHarness(t: TestDb): EngineHarness {
  const handlers = new HandlerRegistry();
  const workers: Worker[] = [];
  const logs: string[] = [];
  const log = createLogger('debug', (l) => logs.push(l));
  return {
    handlers,
    logs,
    handle: (name, fn) => handlers.register(name, undefined, fn),
    async worker(options = {}) {
      const w = createWorker({
        pool: t.database.pool,
        connectionString: t.url,
        handlers,
        log,
        pollMs: 200,
        reconcileMs: 200,
        secrets: TEST_SECRETS,
        ...options,
      });
      await w.start();
      workers.push(w);
      track(w, `worker ${options.workerId ?? '(unnamed)'} of engineHarness (stopAll() stops it)`);
      return w;
    },
    async stopAll() {
      await Promise.all(
        workers.splice(0).map(async (w) => {
          await w.stop({ graceMs: 2000 });
          untrack(w);
        }),
      );
    },
  };
}

// The one polling helper (see ./eventually.ts), here too for the tests that import it from here.
export { eventually } from './eventually.js';

/**
 * Pauses jobgate's own cron jobs (the reaper, alert evaluation) in `t`'s workspace: a test that
 * counts or orders executions would otherwise see theirs start among its own.
 */
export async function pauseOwnCronJobs(t: TestDb): Promise<void> {
  await t.query(`update jobs set status = 'PAUSED', next_fire_at = null where name in ('reaper', 'alerts')`);
}
import { eventually } from './eventually.js';

/** Every execution of the job, oldest first. */
export async function executionsOf(t: TestDb, jobId: string) {
  return (await t.query('select * from executions where job_id = $1 order by created_at', [jobId])).rows;
}

export async function attemptsOf(t: TestDb, executionId: string) {
  return (await t.query('select * from attempts where execution_id = $1 order by attempt_number', [executionId])).rows;
}

/** Waits for the job's (single) execution to reach one of `statuses`. */
export async function settled(t: TestDb, jobId: string, statuses = ['SUCCEEDED', 'FAILED', 'CANCELLED'], ms = 10_000) {
  return eventually(
    async () => {
      const [ex] = await executionsOf(t, jobId);
      return ex && statuses.includes(ex.status) ? ex : undefined;
    },
    ms,
    `execution of ${jobId} to be ${statuses.join('/')}`,
  );
}

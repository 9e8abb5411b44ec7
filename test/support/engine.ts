/**
 * Workers in the test process, over a test database: real claims, real leases, real HTTP.
 */
import { createLogger } from '../../src/log.js';
import type { CreateJobInput } from '../../src/service/kernel/inputs.js';
import { createJobService } from '../../src/service/index.js';
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

/**
 * The next minute boundary at least 25 s away on the database's clock (ms since the epoch): a
 * cron job created as if at 30 s before it (`createCronJobBefore`) has its next occurrence there,
 * and a scheduler pass 20 s before it writes that occurrence ahead while the database's own now()
 * is before it too (the withdrawing trigger's test, migration 000054).
 */
export async function nextBoundary(t: TestDb): Promise<number> {
  const dbNow = (await t.query<{ now: Date }>('select now() as now')).rows[0]!.now.getTime();
  return Math.ceil((dbNow + 25_000) / 60_000) * 60_000;
}

/** `input` created as a job by `t`'s actor through a service whose clock reads 30 s before `boundary`. */
export async function createCronJobBefore(t: TestDb, boundary: number, input: CreateJobInput) {
  const service = createJobService({
    db: t.db,
    defaultMaxAttempts: 5,
    secrets: TEST_SECRETS,
    clock: async () => new Date(boundary - 30_000),
  });
  return (await service.createJob(t.actor, input)).job;
}

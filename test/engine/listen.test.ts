/**
 * The worker's LISTEN connection: work is picked up by notification (the poll is set far out
 * of reach here), and after its backend is terminated the worker listens again on its own.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { databaseTimeIn, untilDatabaseTimePasses } from '../support/clock.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let engine: EngineHarness;
let endpointId: string;
const ran: string[] = [];

beforeAll(async () => {
  t = await createTestDb();
  engine = engineHarness(t);
  engine.handle('listen.record', async (_input, ctx) => void ran.push(ctx.executionId));
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'listen.target', kind: 'HANDLER', handlerName: 'listen.record' })).id;
});
afterAll(async () => {
  await engine.stopAll();
  await t.close();
});

const listenPid = async () =>
  (
    await t.query(`select pid from pg_stat_activity where datname = current_database() and application_name = 'jobgate-worker-listen'`)
  ).rows.map((r) => r.pid as number);

describe('worker LISTEN connection', () => {
  it('is woken by notifications, and listens again after its backend is terminated', async () => {
    await engine.worker({ pollMs: 600_000, reconcileMs: 600_000 });
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    const first = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node.id;
    await eventually(async () => ran.includes(first), 10_000, 'the first execution (woken by NOTIFY)');

    const [pid] = await listenPid();
    expect(pid).toBeTypeOf('number');
    await t.query('select pg_terminate_backend($1)', [pid]);
    await eventually(
      async () => {
        const pids = await listenPid();
        return pids.length === 1 && pids[0] !== pid;
      },
      10_000,
      'a new listening connection',
    );
    expect(engine.logs.some((l) => l.includes('jobgate-worker-listen: listening connection lost'))).toBe(true);

    const again = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    const second = (await t.service.executions(t.actor, { jobId: again.job.id })).edges[0]!.node.id;
    await eventually(async () => ran.includes(second), 10_000, 'the second execution (woken by NOTIFY on the new connection)');
  });

  it('is woken when a paused job whose execution came due meanwhile is resumed', async () => {
    await engine.worker({ pollMs: 600_000, reconcileMs: 600_000 });
    const runAt = await databaseTimeIn(t, 300);
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt });
    await t.service.pauseJob(t.actor, job.id);
    const id = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node.id;
    // Due now; the workers' timers have fired and found it paused, so none is set for it.
    await untilDatabaseTimePasses(t, runAt);
    await quietPeriod(QUIET.claim);
    expect(ran).not.toContain(id);
    await t.service.resumeJob(t.actor, job.id);
    await eventually(async () => ran.includes(id), 5000, "the resumed job's execution");
  });

  it('is woken when a pending serial occurrence is cancelled, so the next one takes its turn', async () => {
    await engine.worker({ pollMs: 600_000, reconcileMs: 600_000 });
    const { job } = await t.service.createJob(t.actor, {
      endpointId,
      kind: 'CRON',
      cron: { expression: '0 0 1 1 *', overlapPolicy: 'QUEUE' },
    });
    // Two queued occurrences, as the scheduler leaves them: the first waits an hour for its retry,
    // the second is due but not its turn.
    const occurrence = async (minutesAgo: number, retryInMinutes: number) =>
      (
        await t.query(
          `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, attempt_count, serial)
         select workspace_id, id, endpoint_id, now() - make_interval(mins => $2), now() + make_interval(mins => $3), 5, $4, true
         from jobs where id = $1 returning id`,
          [job.id, minutesAgo, retryInMinutes, retryInMinutes > 0 ? 1 : 0],
        )
      ).rows[0].id as string;
    const first = await occurrence(2, 60);
    const second = await occurrence(1, -1);
    await quietPeriod(QUIET.claim);
    expect(ran).not.toContain(second);
    await t.service.cancelExecution(t.actor, first);
    await eventually(async () => ran.includes(second), 5000, 'the next occurrence');
  });

  it('times work created for later from its notification: an idle worker neither claims nor reads the next due time for it', async () => {
    const queries = vi.spyOn(t.database.pool, 'query');
    const dueReads = () => queries.mock.calls.filter(([q]) => (q as { name?: string }).name === 'jobgate.next-due').length;
    try {
      // This worker alone reads the due time here.
      await engine.stopAll();
      await engine.worker({ pollMs: 600_000, reconcileMs: 600_000 });
      // Its first claims came back short and read the next due time: the worker is idle.
      await eventually(async () => dueReads() > 0, 10_000, 'the idle worker');
      for (let seen = -1; seen !== dueReads(); await quietPeriod(QUIET.claim)) seen = dueReads();
      const before = dueReads();
      const runAt = await databaseTimeIn(t, 4000);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt });
        ids.push((await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node.id);
      }
      // Their hints have arrived (sent at each commit) long before they are due.
      await quietPeriod(QUIET.claim);
      expect(dueReads()).toBe(before);
      // Nothing else wakes it before then (the poll is ten minutes away): the hints armed its timer.
      await eventually(async () => ids.every((id) => ran.includes(id)), 15_000, 'the delayed executions');
      const { rows } = await t.query<{ early: boolean }>(
        'select bool_or(attempt_started_at < $2) as early from executions where id = any($1::uuid[])',
        [ids, runAt],
      );
      expect(rows[0]!.early).toBe(false);
    } finally {
      queries.mockRestore();
    }
  });

  it("times the next delayed execution on the database's clock: a host clock ahead does not make it spin", async () => {
    const realNow = Date.now.bind(Date);
    const dueQueries = vi.spyOn(t.database.pool, 'query');
    const clock = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 10_000);
    try {
      await engine.worker({ pollMs: 600_000, reconcileMs: 600_000 });
      const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(realNow() + 2000) });
      const id = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node.id;
      await eventually(async () => ran.includes(id), 5000, 'the delayed execution');
      const looked = dueQueries.mock.calls.filter(([q]) => (q as { name?: string }).name === 'jobgate.next-due').length;
      // One look per claim that came back short: a handful, not one per turn of the event loop.
      expect(looked).toBeLessThan(20);
    } finally {
      clock.mockRestore();
      dueQueries.mockRestore();
    }
  });
});

/**
 * Lock order between a worker's heartbeat and its outcome batches: both lock many executions, from
 * separate connections, at the same time. Each takes its rows in id order, so they wait on each
 * other in turn and never deadlock; a deadlock that does happen (with a statement outside that
 * order) is retried, and the outcome still recorded.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { completeExecutions, type Completion } from '../../src/db/statements/complete.js';
import { heartbeat } from '../../src/db/statements/lease.js';
import { pgTypes } from '../../src/db/pg-types.js';
import { DEADLOCK_DETECTED } from '../../src/db/sqlstate.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { createAvailability } from '../../src/service/engine/runtime/availability.js';
import { createOutcomeRecorder } from '../../src/service/engine/worker/outcome-recorder.js';
import type { InFlight } from '../../src/service/engine/worker/state.js';
import type { ClaimedExecution } from '../../src/db/statements/claim.js';
import { noopObserver } from '../../src/service/kernel/observer.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { ownPool } from '../support/own-pool.js';

let t: TestDb;
/** Pools of their own: each statement of a round on its own connection. */
let pools: pg.Pool[] = [];

/** Executions of one job, RUNNING under worker `w` (or finished, as history), ready to be heartbeaten and completed. */
async function runningExecutions(count: number, status: 'RUNNING' | 'SUCCEEDED' = 'RUNNING'): Promise<string[]> {
  const job = await t.service.createJob(t.actor, { endpointName: 'lock.order', kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
  const { rows } = await t.query<{ id: string }>(
    `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, status, lease_owner,
                             lease_epoch, lease_expires_at, attempt_count, attempt_started_at)
     select j.workspace_id, j.id, j.endpoint_id, now() + make_interval(secs => i), now(), 1000000, $3, 'w',
            1, now() + interval '1 hour', 1, now()
     from jobs j, generate_series(1, $2::int) i where j.id = $1
     returning id`,
    [job.job.id, count, status],
  );
  return rows.map((r) => r.id);
}

/** Puts the rows back RUNNING under a new lease (epoch and attempt count one up), as a new claim would. */
async function reclaim(ids: string[]): Promise<Map<string, number>> {
  const { rows } = await t.query<{ id: string; lease_epoch: string }>(
    `update executions set status = 'RUNNING', lease_owner = 'w', lease_epoch = lease_epoch + 1, attempt_count = attempt_count + 1,
       lease_expires_at = now() + interval '1 hour', attempt_started_at = now(), finished_at = null, last_error = null
     where id = any($1::uuid[]) returning id, lease_epoch`,
    [ids],
  );
  return new Map(rows.map((r) => [r.id, Number(r.lease_epoch)]));
}

function succeeded(id: string, epoch: number): Completion {
  return {
    executionId: id,
    epoch,
    outcome: 'SUCCEEDED',
    retryable: false,
    retryDelayMs: null,
    statusCode: null,
    durationMs: 1,
    error: null,
    responseExcerpt: null,
  };
}

function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

beforeEach(async () => {
  t = await createTestDb();
  pools = Array.from({ length: 4 }, () => ownPool({ connectionString: t.url, max: 1, types: pgTypes }));
  await t.service.registerEndpoint(t.actor, { name: 'lock.order', kind: 'HANDLER', handlerName: 'noop' });
});
afterEach(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await t.close();
});

describe('lock order of heartbeats and outcome batches', () => {
  it('a heartbeat and an outcome batch over the same executions, in opposite orders, never deadlock', async () => {
    const ROUNDS = 25;
    const ROWS = 400;
    const ids = await runningExecutions(ROWS);
    // Enough rows beside them that each statement finds its rows by primary key, one after the
    // other in the order of its list, as the engine's statements do on a real queue.
    await runningExecutions(20_000, 'SUCCEEDED');
    await t.query('analyze executions');
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const epochs = await reclaim(ids);
      const order = shuffled(ids);
      const reversed = [...order].reverse();
      const held = (list: string[]) => list.map((id) => ({ id, epoch: epochs.get(id)! }));
      // Heartbeats in one order and its reverse, outcome batches in both orders too (the second
      // records nothing: the first took the leases), each from its own connection, all at once.
      const results = await Promise.allSettled([
        heartbeat(pools[0]!, held(order), 30_000),
        completeExecutions(
          pools[1]!,
          'w',
          reversed.map((id) => succeeded(id, epochs.get(id)!)),
        ),
        heartbeat(pools[2]!, held(reversed), 30_000),
        completeExecutions(
          pools[3]!,
          'w',
          order.map((id) => succeeded(id, epochs.get(id)!)),
        ),
      ]);
      for (const r of results) if (r.status === 'rejected') failures.push(`round ${round}: ${r.reason.code}: ${r.reason.message}`);
      if (failures.length > 0) break;
      // Every outcome was recorded, once.
      const { rows } = await t.query<{ status: string; n: number }>(
        `select status, count(*)::int as n from executions where id = any($1::uuid[]) group by status`,
        [ids],
      );
      expect(rows).toEqual([{ status: 'SUCCEEDED', n: ROWS }]);
    }
    expect(failures).toEqual([]);
    const attempts = await t.query<{ n: number }>(`select count(*)::int as n from attempts where execution_id = any($1::uuid[])`, [ids]);
    expect(attempts.rows[0]!.n).toBe(ROUNDS * ROWS);
  }, 120_000);

  it('an outcome batch aborted by a deadlock is sent again, and its outcomes are recorded', async () => {
    const [low, high] = (await runningExecutions(2)).sort();
    const epochs = await reclaim([low!, high!]);
    // A transaction outside the engine's order: it holds the higher id, and will ask for the lower
    // one once the batch (which locks the lower first) waits on the higher. It never detects the
    // cycle itself (a long deadlock_timeout), so the batch is the one Postgres aborts.
    const other = await pools[0]!.connect();
    const retried: string[] = [];
    const logs: string[] = [];
    const inFlight = new Map<string, InFlight>();
    const recorder = createOutcomeRecorder({
      id: 'w',
      pool: t.database.pool,
      log: createLogger('debug', (l) => logs.push(l)),
      observer: { ...noopObserver, conflictRetried: (statement, sqlstate) => void retried.push(`${statement} ${sqlstate}`) },
      availability: createAvailability(silentLogger),
      inFlight,
      running: () => true,
      onRetryScheduled: () => {},
      flushed: () => {},
    });
    try {
      await other.query('begin');
      await other.query(`set local deadlock_timeout = '60s'`);
      await other.query('select id from executions where id = $1 for update', [high]);
      for (const id of [high!, low!]) {
        const ex = { id, lease_epoch: epochs.get(id)!, endpoint_name: 'lock.order', serial: false } as ClaimedExecution;
        recorder.record(succeeded(id, epochs.get(id)!), ex);
      }
      // The batch holds the lower id and waits on the higher.
      await eventually(async () => {
        const { rows } = await t.query(
          `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%with done as%'`,
        );
        expect(rows.length).toBe(1);
        return true;
      });
      // Closing the cycle: Postgres aborts the batch (40P01) and lets this lock through.
      await other.query('select id from executions where id = $1 for update', [low]);
      await other.query('commit');
    } finally {
      other.release();
    }
    await recorder.settled();
    // At least once: a clean-clone run on a loaded machine saw the batch aborted twice (cause not
    // found); what this test holds is that an aborted batch is sent again until it is recorded.
    expect(retried.length).toBeGreaterThanOrEqual(1);
    expect(new Set(retried)).toEqual(new Set([`outcomes ${DEADLOCK_DETECTED}`]));
    expect(logs.some((l) => l.includes('hit a conflict (40P01'))).toBe(true);
    const { rows } = await t.query<{ id: string; status: string }>(
      `select id, status from executions where id = any($1::uuid[]) order by id`,
      [[low, high]],
    );
    expect(rows).toEqual([
      { id: low, status: 'SUCCEEDED' },
      { id: high, status: 'SUCCEEDED' },
    ]);
    const attempts = await t.query(
      `select execution_id, outcome from attempts where execution_id = any($1::uuid[]) order by execution_id`,
      [[low, high]],
    );
    expect(attempts.rows).toEqual([
      { execution_id: low, outcome: 'SUCCEEDED' },
      { execution_id: high, outcome: 'SUCCEEDED' },
    ]);
  }, 30_000);
});

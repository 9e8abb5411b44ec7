/**
 * Lock order between a worker ending a batch member and the mutations that cancel members. A
 * worker's outcome holds the member's execution while the triggers count it (migration 000048);
 * a job mutation takes the job, then its executions. Each interleaving is built by hand, with the
 * worker's outcome transaction on a connection of its own, so that the one order that could close
 * a cycle happens every time: the worker holds the execution, the mutation waits for it, then the
 * worker's trigger runs. Before the fix each of these was a deadlock (SQLSTATE 40P01) that one
 * side lost. And outcome statements that end members of several batches at once, as workers
 * draining several batches send them, count each batch in id order.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../../src/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';

let t: TestDb;
let gate: Jobgate;

beforeAll(async () => {
  t = await createTestDb();
  gate = await createJobgate({ databaseUrl: t.url, migrate: false });
  await t.service.registerEndpoint(t.actor, { name: 'locks.part', kind: 'HANDLER', handlerName: 'part', maxAttempts: 1 });
});
afterAll(async () => {
  await gate?.close();
  await t?.close();
});

const member = { endpointName: 'locks.part', kind: 'IMMEDIATE' as const };

/** A batch of two members (no worker runs them) and its onComplete job; the first member's execution. */
async function batchOfTwo() {
  const { batch } = await t.service.createBatch(t.actor, { open: true, jobs: [member, member], onComplete: member });
  const { rows } = await t.query<{ id: string; job_id: string }>(
    `select e.id, e.job_id from executions e join jobs j on j.id = e.job_id where j.batch_id = $1 order by e.id limit 1`,
    [batch.id],
  );
  // As a worker's claim leaves it.
  await t.query(
    `update executions set status = 'RUNNING', attempt_count = 1, lease_owner = 'w', lease_epoch = lease_epoch + 1,
            lease_expires_at = now() + interval '1 minute' where id = $1`,
    [rows[0]!.id],
  );
  return { batch, execution: rows[0]!.id, job: rows[0]!.job_id };
}

/**
 * The worker's outcome for `execution`, around `mutation`: the worker's transaction locks the
 * execution, `mutation` starts and waits for it, then the worker ends the execution (its triggers
 * count the member) and commits. Both must succeed.
 */
async function endingWhile(execution: string, mutation: () => Promise<unknown>): Promise<void> {
  const worker = new pg.Client({ connectionString: t.url });
  await worker.connect();
  try {
    await worker.query('begin');
    await worker.query(`select 1 from executions where id = $1 for no key update`, [execution]);
    const waiting = await t.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database()
      and wait_event_type = 'Lock'`);
    expect(waiting.rows[0]!.n).toBe(0);
    const done = mutation().then(
      () => undefined,
      (e: unknown) => e,
    );
    await eventually(
      async () =>
        (
          await t.query<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
          )
        ).rows[0]!.n > 0,
      10_000,
      'the mutation to wait for the execution',
    );
    const ended = await worker
      .query(`update executions set status = 'SUCCEEDED', finished_at = now(), updated_at = now() where id = $1`, [execution])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await worker.query(ended ? 'rollback' : 'commit');
    expect(ended, 'the worker ending the member').toBeUndefined();
    expect(await done, 'the mutation').toBeUndefined();
  } finally {
    await worker.end();
  }
}

describe('a worker ending a batch member', () => {
  it('and cancelJob on that member both go through: the member counts as it ended', async () => {
    const { batch, execution, job } = await batchOfTwo();
    await endingWhile(execution, () => t.service.cancelJob(t.actor, job));
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ total: 2, succeeded: 1, cancelled: 0 });
  });

  it("and cancelBatch in a caller's transaction both go through: the batch completes with it counted", async () => {
    const { batch, execution } = await batchOfTwo();
    const caller = new pg.Client({ connectionString: t.url });
    await caller.connect();
    try {
      await endingWhile(execution, async () => {
        await caller.query('begin');
        try {
          await gate.inTransaction(caller, t.actor).cancelBatch(batch.id);
          await caller.query('commit');
        } catch (error) {
          await caller.query('rollback');
          throw error;
        }
      });
    } finally {
      await caller.end();
    }
    await eventually(async () => (await t.service.batch(t.actor, batch.id)).completedAt !== null, 10_000, 'the batch to complete');
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ open: false, total: 2, succeeded: 1, cancelled: 1 });
    const fanIn = await t.query(`select status from executions where job_id = $1`, [batch.onCompleteJobId]);
    expect(fanIn.rows[0].status).toBe('CANCELLED');
  });
});

describe('outcome statements ending members of several batches', () => {
  it('run at once without a deadlock, and count every member once', async () => {
    // Four batches of 250 members, the members interleaved by id across the batches.
    const batches: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { batch } = await t.service.createBatch(t.actor, { jobs: Array.from({ length: 250 }, () => member), onComplete: member });
      batches.push(batch.id);
    }
    const { rows } = await t.query<{ id: string }>(
      `select e.id from executions e join jobs j on j.id = e.job_id where j.batch_id = any($1::uuid[]) order by e.id`,
      [batches],
    );
    await t.query(
      `update executions set status = 'RUNNING', attempt_count = 1, lease_owner = 'w', lease_epoch = lease_epoch + 1,
                          lease_expires_at = now() + interval '1 minute' where id = any($1::uuid[])`,
      [rows.map((r) => r.id)],
    );
    // Eight sessions, each ending slices of 25 as a worker's outcome statement does (its rows locked
    // in id order first), the slices dealt round-robin so each spans the batches in its own order.
    const slices = Array.from({ length: 40 }, (_, k) => rows.slice(k * 25, k * 25 + 25).map((r) => r.id));
    const failures: unknown[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const session = new pg.Client({ connectionString: t.url });
        await session.connect();
        try {
          for (let k = w; k < slices.length; k += 8) {
            const ids = [...slices[k]!].reverse(); // updated in the reverse of id order, as a join may visit them
            await session
              .query(
                `with locked as materialized (select id from executions where id = any($1::uuid[]) order by id for no key update)
                 update executions e set status = 'SUCCEEDED', finished_at = now(), updated_at = now()
                 from unnest($1::uuid[]) with ordinality u(id, n) where e.id = u.id and e.id in (select id from locked)`,
                [ids],
              )
              .catch((e: unknown) => failures.push(e));
          }
        } finally {
          await session.end();
        }
      }),
    );
    expect(failures.map((e) => (e as Error).message)).toEqual([]);
    for (const id of batches)
      expect(await t.service.batch(t.actor, id)).toMatchObject({ total: 250, succeeded: 250, completedAt: expect.any(Date) });
  });
});

describe('cancelBatch', () => {
  it('on a closed batch whose unfinished members are all pending: the onComplete job is never released to the workers', async () => {
    const { batch } = await t.service.createBatch(t.actor, { jobs: [member, member], onComplete: member });
    const seen: string[] = [];
    const watcher = new pg.Client({ connectionString: t.url });
    await watcher.connect();
    try {
      // Every committed state of the onComplete execution while the cancel runs.
      let watching = true;
      const watch = (async () => {
        while (watching) {
          const r = await watcher.query(`select status, blocked from executions where job_id = $1`, [batch.onCompleteJobId]);
          seen.push(`${r.rows[0].status}${r.rows[0].blocked ? ' blocked' : ''}`);
        }
      })();
      const { cancelledJobs } = await t.service.cancelBatch(t.actor, batch.id);
      watching = false;
      await watch;
      expect(cancelledJobs).toBe(2);
    } finally {
      await watcher.end();
    }
    expect(seen.length).toBeGreaterThan(0);
    expect(seen).not.toContain('PENDING');
    expect((await t.query(`select status from executions where job_id = $1`, [batch.onCompleteJobId])).rows[0].status).toBe('CANCELLED');
    expect(await t.service.batch(t.actor, batch.id)).toMatchObject({ total: 2, cancelled: 2, completedAt: expect.any(Date) });
  });
});

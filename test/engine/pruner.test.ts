/**
 * Retention on a real database: the pruner deletes finished history past its window, in bounded
 * batches audited one row each, keeps what it must (young rows, FAILED ones longer, the newest N
 * per job, anything live), and two pruners at once delete each row once.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/db/pool.js';
import { pruneBatch, takeSlice } from '../../src/db/statements/pruning.js';
import { createLogger } from '../../src/log.js';
import { createPruner, pruneBounded, type PrunedBatch, type PrunerOptions } from '../../src/service/engine/maintenance/pruner.js';
import { createPresence } from '../../src/service/engine/runtime/presence.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';

let t: TestDb;
let endpointId: string;
let otherEndpointId: string;
const logs: string[] = [];
const log = createLogger('debug', (l) => logs.push(l));

beforeAll(async () => {
  t = await createTestDb();
  fixtureEpoch = (await t.query<{ now: Date }>(`select now()`)).rows[0]!.now;
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'ret.target', kind: 'HANDLER', handlerName: 'noop' })).id;
  otherEndpointId = (await t.service.registerEndpoint(t.otherActor, { name: 'ret.target', kind: 'HANDLER', handlerName: 'noop' })).id;
});
afterAll(async () => {
  await t?.close();
});

beforeEach(async () => {
  // Every slice due now, nobody holding one.
  await t.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
});

/** A job whose only own execution is a far-future DELAYED one (PENDING: live). */
async function newJob(actor = t.actor, endpoint = endpointId): Promise<string> {
  const { job } = await t.service.createJob(actor, { endpointId: endpoint, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
  return job.id;
}

/**
 * The fixture's clock: `history` places every row at `fixtureEpoch - ageDays + k ms`, where `k`
 * counts every fixture row this file makes. Executions are unique on (job, scheduled_for), so
 * no two fixture rows may share an instant: one epoch for the whole file (not each statement's
 * `now()`, which moves between statements by an arbitrary amount) and a counter that never
 * repeats make a collision impossible, whatever the ages, jobs or timing.
 */
let fixtureEpoch: Date;
let fixtureRows = 0;

/**
 * `n` executions of a job, created `ageDays` ago (1 ms apart, each at an instant no other
 * fixture row has), each with one attempt; finished (an hour after creation) unless live.
 */
async function history(jobId: string, n: number, status: string, ageDays: number): Promise<string[]> {
  const live = status === 'PENDING' || status === 'RUNNING';
  const { rows } = await t.query<{ id: string }>(
    `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, status, attempt_count, max_attempts, run_after, finished_at, created_at, lease_owner, lease_expires_at)
     select j.workspace_id, j.id, j.endpoint_id, c, $2, 1, 5, c, case when $4 then null else c + interval '1 hour' end, c,
            case when $2 = 'RUNNING' then 'w' end, case when $2 = 'RUNNING' then now() + interval '1 hour' end
     from jobs j, generate_series(1, $3::int) i,
          lateral (select $6::timestamptz - make_interval(days => $5::int) + ($7::int + i) * interval '1 ms' as c) t
     where j.id = $1
     returning id`,
    [jobId, status, n, live, ageDays, fixtureEpoch, fixtureRows],
  );
  fixtureRows += n;
  await t.query(
    `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome)
     select e.workspace_id, e.id, 1, 1, 'w', e.created_at, e.finished_at, case when e.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') then e.status end
     from executions e where e.id = any($1::uuid[])`,
    [rows.map((r) => r.id)],
  );
  return rows.map((r) => r.id);
}

async function remaining(ids: string[]): Promise<{ executions: number; attempts: number }> {
  const { rows } = await t.query(
    `select (select count(*) from executions where id = any($1::uuid[]))::int as executions,
            (select count(*) from attempts where execution_id = any($1::uuid[]))::int as attempts`,
    [ids],
  );
  return rows[0];
}

async function auditedSince(id: number, workspaceId = t.actor.workspaceId) {
  const { rows } = await t.query(
    `select input from audit_log where workspace_id = $1 and action = 'retention.prune' and id > $2 order by id`,
    [workspaceId, id],
  );
  return rows.map((r) => r.input as Record<string, number | string>);
}

async function lastAuditId(): Promise<number> {
  return Number((await t.query(`select coalesce(max(id), 0) as id from audit_log`)).rows[0].id);
}

function pruner(options: Partial<PrunerOptions> = {}) {
  const batches: PrunedBatch[] = [];
  const p = createPruner({ pool: t.database.pool, log, pauseMs: 0, onPruned: (b) => batches.push(b), ...options });
  return { p, batches };
}

const sum = (xs: Record<string, unknown>[], key: string) => xs.reduce((a, x) => a + (Number(x[key]) || 0), 0);

describe('executions', () => {
  it('prunes old finished executions with their attempts, keeps young ones, FAILED ones longer, and never a live one', async () => {
    const job = await newJob();
    const oldOk = await history(job, 40, 'SUCCEEDED', 40);
    const oldCancelled = await history(job, 5, 'CANCELLED', 40);
    const youngOk = await history(job, 10, 'SUCCEEDED', 5);
    const failedInWindow = await history(job, 7, 'FAILED', 40);
    const failedPast = await history(job, 6, 'FAILED', 100);
    const liveOld = [...(await history(job, 3, 'PENDING', 200)), ...(await history(job, 2, 'RUNNING', 200))];
    const since = await lastAuditId();
    const { p, batches } = pruner({ batchSize: 8, defaults: { keepPerJob: 1 } });
    await p.runOnce();

    expect(await remaining([...oldOk, ...oldCancelled])).toEqual({ executions: 0, attempts: 0 });
    expect(await remaining(failedPast)).toEqual({ executions: 0, attempts: 0 });
    expect(await remaining(youngOk)).toEqual({ executions: 10, attempts: 10 });
    expect(await remaining(failedInWindow)).toEqual({ executions: 7, attempts: 7 });
    expect(await remaining(liveOld)).toEqual({ executions: 5, attempts: 5 });

    // One audit row per batch, each within the batch size, adding up to what went.
    const audited = await auditedSince(since);
    expect(audited.length).toBeGreaterThan(1);
    for (const a of audited) {
      expect(a.kind).toBe('EXECUTIONS');
      expect(Number(a.executions)).toBeLessThanOrEqual(8);
    }
    expect(sum(audited, 'executions')).toBe(51);
    expect(sum(audited, 'attempts')).toBe(51);
    // The hook saw the same batches.
    const ours = batches.filter((b) => b.workspaceId === t.actor.workspaceId);
    expect(ours.length).toBe(audited.length);
    expect(ours.reduce((a, b) => a + b.rows.executions, 0)).toBe(51);
  });

  it('keeps the newest N executions of each recurring job whatever their age, none of a one-off job', async () => {
    await onlyDue('EXECUTIONS');
    const a = await oldJob(61, { kind: 'CRON' });
    const b = await oldJob(61, { kind: 'CRON' });
    const aRows = await history(a, 20, 'SUCCEEDED', 60);
    const bRows = await history(b, 2, 'SUCCEEDED', 60);
    // A one-off job (here with a live execution, so the job itself stays) keeps none past the window.
    const oneOff = await newJob();
    const oneOffRows = await history(oneOff, 6, 'SUCCEEDED', 60);
    const { p } = pruner({ batchSize: 5, defaults: { keepPerJob: 4 } });
    await p.runOnce();
    // Job a keeps its 4 newest.
    const kept = (await t.query(`select id from executions where job_id = $1`, [a])).rows.map((r) => r.id);
    expect(kept.sort()).toEqual(
      (await t.query(`select id from executions where id = any($1::uuid[]) order by created_at desc, id desc limit 4`, [aRows])).rows
        .map((r) => r.id)
        .sort(),
    );
    expect((await remaining(bRows)).executions).toBe(2);
    expect(await remaining(oneOffRows)).toEqual({ executions: 0, attempts: 0 });
  });

  it('keeps a FAILED execution that is re-driven to PENDING, and prunes it again only once it has aged', async () => {
    const job = await newJob();
    const [failed] = await history(job, 1, 'FAILED', 100);
    await history(job, 3, 'SUCCEEDED', 1); // newer ones, so the newest-N rule does not keep it
    await t.service.retryExecution(t.actor, failed!);
    const { p } = pruner({ defaults: { keepPerJob: 1 } });
    await p.runOnce();
    expect((await t.query(`select status from executions where id = $1`, [failed])).rows[0]?.status).toBe('PENDING');
  });
});

describe('audit log and runs', () => {
  it('prunes audit rows past their window and keeps the rest', async () => {
    // The workspace's oldest rows (by id, which grows with time) aged past the default 365 days.
    const old = await t.query(
      `insert into audit_log (workspace_id, actor_kind, action, input, result_code)
                               select $1, 'system', 'test.old', '{}', 'OK' from generate_series(1, 30) returning id`,
      [t.actor.workspaceId],
    );
    const through = Math.max(...old.rows.map((r) => Number(r.id)));
    await t.query(`update audit_log set created_at = now() - interval '400 days' where workspace_id = $1 and id <= $2`, [
      t.actor.workspaceId,
      through,
    ]);
    const aged = (
      await t.query(`select count(*)::int as n from audit_log where workspace_id = $1 and id <= $2`, [t.actor.workspaceId, through])
    ).rows[0].n as number;
    const young = await t.query(
      `insert into audit_log (workspace_id, actor_kind, action, input, result_code)
                                 select $1, 'system', 'test.young', '{}', 'OK' from generate_series(1, 3) returning id`,
      [t.actor.workspaceId],
    );
    const theirs = await t.query(
      `insert into audit_log (workspace_id, actor_kind, action, input, result_code, created_at)
                                  values ($1, 'system', 'test.theirs', '{}', 'OK', now() - interval '10 days') returning id`,
      [t.otherActor.workspaceId],
    );
    const { p, batches } = pruner({ batchSize: 7 });
    await p.runOnce();
    expect(
      (await t.query(`select count(*)::int as n from audit_log where workspace_id = $1 and id <= $2`, [t.actor.workspaceId, through]))
        .rows[0].n,
    ).toBe(0);
    expect(
      (
        await t.query(`select count(*)::int as n from audit_log where id = any($1::bigint[])`, [
          [...young.rows, ...theirs.rows].map((r) => r.id),
        ])
      ).rows[0].n,
    ).toBe(4);
    expect(
      batches.filter((b) => b.kind === 'AUDIT' && b.workspaceId === t.actor.workspaceId).reduce((a, b) => a + b.rows.audit_log, 0),
    ).toBe(aged);
  });

  it('prunes finished runs past their window with their findings, and never a live run or its findings', async () => {
    const run = async (status: string, ageDays: number, findings: number) => {
      const { rows } = await t.query(
        `insert into runs (workspace_id, name, status, pause_kind, started_at, finished_at, created_at)
         values ($1, 'scan.' || gen_random_uuid(), $2, case when $2 = 'PAUSED' then 'HANDLER' end, now() - make_interval(days => $3),
                 case when $2 in ('COMPLETED', 'FAILED') then now() - make_interval(days => $3) end, now() - make_interval(days => $3))
         returning id`,
        [t.actor.workspaceId, status, ageDays],
      );
      const id = rows[0].id as string;
      await t.query(
        `insert into findings (workspace_id, run_id, kind, severity, resource_id) select $1, $2, 'k', 'INFO', 'r' || i from generate_series(1, $3::int) i`,
        [t.actor.workspaceId, id, findings],
      );
      return id;
    };
    const oldDone = await run('COMPLETED', 120, 25);
    const oldFailed = await run('FAILED', 120, 0);
    const oldPaused = await run('PAUSED', 120, 4);
    const youngDone = await run('COMPLETED', 10, 2);
    const { p } = pruner({ batchSize: 10 });
    await p.runOnce();
    const left = async (id: string) =>
      (
        await t.query(
          `select (select count(*) from runs where id = $1)::int as runs, (select count(*) from findings where run_id = $1)::int as findings`,
          [id],
        )
      ).rows[0];
    expect(await left(oldDone)).toEqual({ runs: 0, findings: 0 });
    expect(await left(oldFailed)).toEqual({ runs: 0, findings: 0 });
    expect(await left(oldPaused)).toEqual({ runs: 1, findings: 4 });
    expect(await left(youngDone)).toEqual({ runs: 1, findings: 2 });
  });
});

describe('workspaces', () => {
  it("honours a workspace's own window and leaves other workspaces to theirs", async () => {
    const ours = await newJob();
    const theirs = await newJob(t.otherActor, otherEndpointId);
    const oursRows = await history(ours, 5, 'SUCCEEDED', 10);
    const theirRows = await history(theirs, 5, 'SUCCEEDED', 10);
    const ourFailed = await history(ours, 2, 'FAILED', 10);
    await t.service.setRetention(t.otherActor, { executionsDays: 7 });
    await t.service.setRetention(t.actor, { failedExecutionsDays: 3 });
    const { p } = pruner({ defaults: { keepPerJob: 1 } });
    await p.runOnce();
    expect((await remaining(theirRows)).executions).toBe(0);
    expect((await remaining(oursRows)).executions).toBe(5); // 10 days < the default 30
    expect((await remaining(ourFailed)).executions).toBe(0);
    // Back to the defaults (null); 0 keeps forever.
    await t.service.setRetention(t.otherActor, { executionsDays: 0 });
    const kept = await history(theirs, 3, 'SUCCEEDED', 3000);
    await t.query(`update retention_slices set next_due_at = now()`);
    await p.runOnce();
    expect((await remaining(kept)).executions).toBe(3);
    await t.service.setRetention(t.otherActor, { executionsDays: null, failedExecutionsDays: null });
    await t.service.setRetention(t.actor, { failedExecutionsDays: null });
    await t.query(`delete from attempts where execution_id = any($1::uuid[])`, [kept]);
    await t.query(`delete from executions where id = any($1::uuid[])`, [kept]);
  });
});

describe('exactly once across workers', () => {
  it('two pruners at once take each slice once, and their counts add up to what was deleted', async () => {
    const jobs = [await newJob(), await newJob(), await newJob(t.otherActor, otherEndpointId), await newJob(t.otherActor, otherEndpointId)];
    const doomed: string[] = [];
    for (const job of jobs) doomed.push(...(await history(job, 60, 'SUCCEEDED', 50)));
    await t.query(
      `insert into audit_log (workspace_id, actor_kind, action, input, result_code)
                   select w, 'system', 'test.old2', '{}', 'OK' from unnest($1::uuid[]) w, generate_series(1, 40)`,
      [[t.actor.workspaceId, t.otherActor.workspaceId]],
    );
    const before = await lastAuditId();
    await t.query(`update audit_log set created_at = now() - interval '400 days' where id <= $1`, [before]);
    const agedAudit = (await t.query(`select count(*)::int as n from audit_log where id <= $1`, [before])).rows[0].n as number;
    // Each pruner on its own pool, so their statements truly run side by side.
    const pools: Database[] = [createDatabase({ connectionString: t.url, max: 3 }), createDatabase({ connectionString: t.url, max: 3 })];
    try {
      const a = pruner({ pool: pools[0]!.pool, id: 'pruner-a', batchSize: 9, defaults: { keepPerJob: 1 } });
      const b = pruner({ pool: pools[1]!.pool, id: 'pruner-b', batchSize: 9, defaults: { keepPerJob: 1 } });
      const [na, nb] = await Promise.all([a.p.runOnce(), b.p.runOnce()]);
      expect(await remaining(doomed)).toEqual({ executions: 0, attempts: 0 });
      const hooked = [...a.batches, ...b.batches];
      const total = (key: keyof PrunedBatch['rows']) => hooked.reduce((s, x) => s + x.rows[key], 0);
      expect(total('executions')).toBe(240);
      expect(total('attempts')).toBe(240);
      expect(total('audit_log')).toBe(agedAudit);
      expect((await t.query(`select count(*)::int as n from audit_log where id <= $1`, [before])).rows[0].n).toBe(0);
      expect(na + nb).toBe(hooked.reduce((s, x) => s + Object.values(x.rows).reduce((p, q) => p + q, 0), 0));
      // Every batch was audited once, in the workspace it pruned.
      const audited = [...(await auditedSince(before)), ...(await auditedSince(before, t.otherActor.workspaceId))];
      expect(audited.length).toBe(hooked.length);
      expect(sum(audited, 'executions')).toBe(240);
      // No slice is left held, and none was pruned by both (a slice's batches all carry one holder).
      expect((await t.query(`select count(*)::int as n from retention_slices where owner is not null`)).rows[0].n).toBe(0);
      const holders = new Map<string, Set<string>>();
      for (const [who, list] of [
        ['a', a.batches],
        ['b', b.batches],
      ] as const) {
        for (const x of list) holders.set(`${x.workspaceId}/${x.kind}`, (holders.get(`${x.workspaceId}/${x.kind}`) ?? new Set()).add(who));
      }
      for (const set of holders.values()) expect(set.size).toBe(1);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  });

  it('fences a holder out once another took its slice: its batch deletes nothing', async () => {
    const job = await newJob();
    const rows = await history(job, 5, 'SUCCEEDED', 50);
    await t.query(
      `update retention_slices set next_due_at = now() + interval '1 day' where not (workspace_id = $1 and kind = 'EXECUTIONS')`,
      [t.actor.workspaceId],
    );
    const slice = (await takeSlice(t.database.pool, 'stalled', 60_000))!;
    expect(slice).toMatchObject({ workspaceId: t.actor.workspaceId, kind: 'EXECUTIONS' });
    // Nobody else can take it while its lease runs.
    expect(await takeSlice(t.database.pool, 'other', 60_000)).toBeUndefined();
    // Its lease runs out; another worker takes it (a new epoch).
    await t.query(`update retention_slices set lease_until = now() - interval '1 s' where workspace_id = $1 and kind = 'EXECUTIONS'`, [
      t.actor.workspaceId,
    ]);
    const taken = (await takeSlice(t.database.pool, 'other', 60_000))!;
    expect(BigInt(taken.epoch)).toBe(BigInt(slice.epoch) + 1n);
    const late = await pruneBatch(
      t.database.pool,
      { slice, owner: 'stalled', leaseMs: 60_000, batch: 100 },
      { executions: { okMs: 1000, failedMs: 1000, keepPerJob: 1 } },
    );
    expect(late.held).toBe(false);
    expect((await remaining(rows)).executions).toBe(5);
  });
});

describe('the loop', () => {
  it('runs in the background once started, and stops between batches', async () => {
    const job = await newJob();
    const rows = await history(job, 30, 'SUCCEEDED', 50);
    const { p } = pruner({ batchSize: 4, pauseMs: 5, pollMs: 100, defaults: { keepPerJob: 1 } });
    p.start();
    try {
      for (let i = 0; i < 400 && (await remaining(rows)).executions > 0; i++) await new Promise((r) => setTimeout(r, 25));
      expect(await remaining(rows)).toEqual({ executions: 0, attempts: 0 });
    } finally {
      await p.stop();
    }
    expect((await t.query(`select count(*)::int as n from retention_slices where owner is not null`)).rows[0].n).toBe(0);
  });

  it('takes a smaller share of its connection while the engine beside it is busy, and its full share once it is not', async () => {
    const job = await newJob();
    // Older than the rows other tests keep, so the first batch of the pass is these.
    const rows = await history(job, 30, 'SUCCEEDED', 5000);
    let busy = true;
    // While busy, the pause after a batch is a million times as long as the batch took: one batch,
    // then a pause no test outlives. Not busy, no pause at all.
    const { p, batches } = pruner({
      batchSize: 4,
      pauseFactor: 0,
      busyPauseFactor: 1_000_000,
      busy: () => busy,
      pollMs: 100,
      defaults: { keepPerJob: 1 },
    });
    await onlyDue('EXECUTIONS');
    // From the start: a pass stopped before (the test above) left where it got to.
    await t.query(`update retention_slices set resume_created_at = null, resume_id = null where workspace_id = $1`, [t.actor.workspaceId]);
    p.start();
    try {
      await eventually(() => batches.length > 0, 10_000, 'the first batch');
      await new Promise((r) => setTimeout(r, 300));
      expect(batches.length).toBe(1);
      expect((await remaining(rows)).executions).toBe(30 - 4);
    } finally {
      // Cuts the pause short and hands the slice back, due at once.
      await p.stop();
    }
    busy = false;
    p.start();
    try {
      await eventually(async () => (await remaining(rows)).executions === 0, 10_000, 'the rest pruned at the full pace');
    } finally {
      await p.stop();
    }
    expect(batches.length).toBeGreaterThan(1);
  });

  it('never pauses past half its slice lease, so no other worker can take the slice meanwhile', async () => {
    const job = await newJob();
    const rows = await history(job, 60, 'SUCCEEDED', 5000);
    await onlyDue('EXECUTIONS');
    await t.query(`update retention_slices set resume_created_at = null, resume_id = null where workspace_id = $1`, [t.actor.workspaceId]);
    // A pause a million times as long as each batch, capped at 150 ms by the 300 ms lease, which
    // each batch extends: fifteen batches of four.
    const { p, batches } = pruner({
      batchSize: 4,
      busyPauseFactor: 1_000_000,
      busy: () => true,
      leaseMs: 300,
      pollMs: 100,
      defaults: { keepPerJob: 1 },
    });
    p.start();
    try {
      await eventually(() => batches.length > 0, 10_000, 'the first batch');
      // Past the lease, had the pause not been capped.
      await new Promise((r) => setTimeout(r, 400));
      const others = await takeSlice(t.database.pool, 'another-pruner', 60_000, {
        workspaceId: t.actor.workspaceId,
        skip: ['JOBS', 'RUNS', 'AUDIT', 'ALERTS', 'EVENTS'],
      });
      expect(others).toBeUndefined();
      await eventually(async () => (await remaining(rows)).executions === 0, 20_000, 'every batch, each after a capped pause');
    } finally {
      await p.stop();
    }
  });
});

/**
 * A job made `ageDays` ago (before any of its fixture executions): IMMEDIATE unless `kind` says,
 * retired `retiredDays` ago when given.
 */
async function oldJob(ageDays: number, opts: { kind?: 'IMMEDIATE' | 'CRON'; retiredDays?: number } = {}): Promise<string> {
  const kind = opts.kind ?? 'IMMEDIATE';
  const { rows } = await t.query<{ id: string }>(
    `insert into jobs (workspace_id, endpoint_id, kind, max_attempts, created_at, status, retired_at,
                       cron_expression, timezone, misfire_policy, overlap_policy)
     values ($1, $2, $3, 5, $4::timestamptz - make_interval(days => $5::int + 1),
             case when $6::int is null then 'ACTIVE' else 'RETIRED' end, $4::timestamptz - make_interval(days => $6::int),
             case when $3 = 'CRON' then '0 * * * *' end, case when $3 = 'CRON' then 'UTC' end,
             case when $3 = 'CRON' then 'SKIP' end, case when $3 = 'CRON' then 'SKIP' end)
     returning id`,
    [t.actor.workspaceId, endpointId, kind, fixtureEpoch, ageDays, opts.retiredDays ?? null],
  );
  return rows[0]!.id;
}

async function jobsLeft(ids: string[]): Promise<number> {
  return (await t.query(`select count(*)::int as n from jobs where id = any($1::uuid[])`, [ids])).rows[0].n as number;
}

/** Only this workspace's slices of `kinds` due; the rest waits a day, so a test sees one kind's work. */
async function onlyDue(...kinds: string[]) {
  await t.query(`update retention_slices set next_due_at = now() + interval '1 day' where not (workspace_id = $1 and kind = any($2))`, [
    t.actor.workspaceId,
    kinds,
  ]);
}

describe('whole jobs', () => {
  it('deletes finished one-off jobs past their window with their executions and attempts, FAILED ones after the longer window', async () => {
    await onlyDue('JOBS');
    const since = await lastAuditId();
    const done: string[] = [];
    const doneExecutions: string[] = [];
    for (let i = 0; i < 5; i++) {
      const job = await oldJob(40);
      done.push(job);
      doneExecutions.push(...(await history(job, 1, i % 2 ? 'CANCELLED' : 'SUCCEEDED', 40)));
    }
    const failedOld = await oldJob(100);
    doneExecutions.push(...(await history(failedOld, 1, 'FAILED', 100)));
    const failedYoung = await oldJob(40);
    await history(failedYoung, 1, 'FAILED', 40);
    const young = await oldJob(5);
    await history(young, 1, 'SUCCEEDED', 5);
    // A one-off job with an old finished execution and one still pending (re-driven) is live.
    const live = await oldJob(60);
    await history(live, 1, 'SUCCEEDED', 60);
    await history(live, 1, 'PENDING', 59);
    const running = await oldJob(60);
    await history(running, 1, 'RUNNING', 60);

    const { p, batches } = pruner({ batchSize: 3, defaults: { keepPerJob: 1 } });
    await p.runOnce();
    expect(await jobsLeft([...done, failedOld])).toBe(0);
    expect(await remaining(doneExecutions)).toEqual({ executions: 0, attempts: 0 });
    expect(await jobsLeft([failedYoung, young, live, running])).toBe(4);
    expect((await t.query(`select count(*)::int as n from executions where job_id = any($1::uuid[])`, [[live, running]])).rows[0].n).toBe(
      3,
    );
    // Audited per batch as JOBS, with what went; the hook saw the same counts.
    const audited = (await auditedSince(since)).filter((a) => a.kind === 'JOBS');
    expect(sum(audited, 'jobs')).toBe(6);
    expect(sum(audited, 'executions')).toBe(6);
    expect(sum(audited, 'attempts')).toBe(6);
    expect(batches.filter((b) => b.kind === 'JOBS').reduce((a, b) => a + b.rows.jobs, 0)).toBe(6);
  });

  it('deletes a retired job once retired past the window, never an active recurring job (its newest N stay)', async () => {
    await onlyDue('JOBS', 'EXECUTIONS');
    const activeCron = await oldJob(200, { kind: 'CRON' });
    const cronRows = await history(activeCron, 10, 'SUCCEEDED', 100);
    const retiredCron = await oldJob(200, { kind: 'CRON', retiredDays: 50 });
    const retiredRows = await history(retiredCron, 10, 'SUCCEEDED', 100);
    const justRetired = await oldJob(200, { kind: 'CRON', retiredDays: 2 });
    await history(justRetired, 3, 'SUCCEEDED', 100);
    const { p } = pruner({ defaults: { keepPerJob: 2 } });
    await p.runOnce();
    expect(await jobsLeft([activeCron, justRetired])).toBe(2);
    expect(await jobsLeft([retiredCron])).toBe(0);
    expect(await remaining(retiredRows)).toEqual({ executions: 0, attempts: 0 });
    // The active cron keeps its newest two, however old.
    expect((await remaining(cronRows)).executions).toBe(2);
  });

  it('keeps a job while another transaction holds one of its executions, and deletes it once released', async () => {
    await onlyDue('JOBS');
    const job = await oldJob(50);
    const [execution] = await history(job, 1, 'SUCCEEDED', 50);
    const holder = await t.database.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select 1 from executions where id = $1 for update`, [execution]);
      await pruner({ defaults: { keepPerJob: 1 } }).p.runOnce();
      expect(await jobsLeft([job])).toBe(1);
      expect((await remaining([execution!])).executions).toBe(1);
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    await t.query(`update retention_slices set next_due_at = now() where workspace_id = $1 and kind = 'JOBS'`, [t.actor.workspaceId]);
    await pruner({ defaults: { keepPerJob: 1 } }).p.runOnce();
    expect(await jobsLeft([job])).toBe(0);
  });

  it('never deletes more than a batch of executions with its jobs: a retired job with more is thinned first, then goes', async () => {
    await onlyDue('JOBS', 'EXECUTIONS');
    const big = await oldJob(80, { kind: 'CRON', retiredDays: 50 });
    const bigRows = await history(big, 12, 'SUCCEEDED', 70);
    const small = await oldJob(79);
    await history(small, 1, 'SUCCEEDED', 70);
    const since = await lastAuditId();
    // JOBS first: it walks past the big job and takes the small one.
    await t.query(`update retention_slices set next_due_at = now() + interval '1 hour' where workspace_id = $1 and kind = 'EXECUTIONS'`, [
      t.actor.workspaceId,
    ]);
    await pruner({ batchSize: 5, defaults: { keepPerJob: 100 } }).p.runOnce();
    expect(await jobsLeft([big, small])).toBe(1);
    expect((await remaining(bigRows)).executions).toBe(12);
    // The EXECUTIONS slice thins it (keepPerJob is for recurring jobs), then JOBS takes it.
    await t.query(`update retention_slices set next_due_at = now() where workspace_id = $1 and kind in ('EXECUTIONS', 'JOBS')`, [
      t.actor.workspaceId,
    ]);
    await pruner({ batchSize: 5, defaults: { keepPerJob: 100 } }).p.runOnce();
    await t.query(`update retention_slices set next_due_at = now() where workspace_id = $1 and kind = 'JOBS'`, [t.actor.workspaceId]);
    await pruner({ batchSize: 5, defaults: { keepPerJob: 100 } }).p.runOnce();
    expect(await jobsLeft([big])).toBe(0);
    expect(await remaining(bigRows)).toEqual({ executions: 0, attempts: 0 });
    const audited = await auditedSince(since);
    for (const a of audited) expect(Number(a.executions ?? 0)).toBeLessThanOrEqual(5);
  });

  it('keeps jobs forever while executions are kept forever', async () => {
    await onlyDue('JOBS');
    const job = await oldJob(400);
    await history(job, 1, 'SUCCEEDED', 400);
    await pruner({ defaults: { keepPerJob: 1, executionsDays: 0, failedExecutionsDays: 0 } }).p.runOnce();
    expect(await jobsLeft([job])).toBe(1);
  });
});

describe('batches', () => {
  /** A batch made `ageDays` ago: completed then (closed, nothing uncounted), unless `open`. */
  async function oldBatch(ageDays: number, opts: { open?: boolean; onCompleteJobId?: string } = {}): Promise<string> {
    const { rows } = await t.query<{ id: string }>(
      `insert into batches (workspace_id, open, completed_at, on_complete_job_id, created_at)
       values ($1, $2, case when $2 then null else $3::timestamptz - make_interval(days => $4::int) end, $5,
               $3::timestamptz - make_interval(days => $4::int + 1))
       returning id`,
      [t.actor.workspaceId, opts.open === true, fixtureEpoch, ageDays, opts.onCompleteJobId ?? null],
    );
    return rows[0]!.id;
  }
  const member = async (batchId: string, ageDays: number, status = 'SUCCEEDED') => {
    const job = await oldJob(ageDays);
    await t.query(`update jobs set batch_id = $2 where id = $1`, [job, batchId]);
    await t.query(
      `update batches set total = total + 1, succeeded = succeeded + ($2 = 'SUCCEEDED')::int,
                     failed = failed + ($2 = 'FAILED')::int where id = $1`,
      [batchId, status],
    );
    await history(job, 1, status, ageDays);
    await t.query(`update executions set batch_outcome = status where job_id = $1`, [job]);
    return job;
  };
  const batchesLeft = async (ids: string[]) =>
    (await t.query(`select id from batches where id = any($1::uuid[])`, [ids])).rows.map((r) => r.id as string).sort();

  it("keeps a member's counted execution while its job is kept, and an incomplete batch's onComplete job", async () => {
    await onlyDue('JOBS', 'EXECUTIONS');
    const batch = await oldBatch(40);
    // Its scheduled execution ended long ago (counted); a later Run now FAILED within the longer window keeps the job.
    const job = await member(batch, 45);
    const [manual] = await history(job, 1, 'FAILED', 40);
    await t.query(`update executions set trigger = 'MANUAL', batch_outcome = null where id = $1`, [manual]);
    const waiting = await oldBatch(40, { open: true });
    const fanIn = await oldJob(50, { retiredDays: 45 });
    await history(fanIn, 1, 'CANCELLED', 45);
    await t.query(`update batches set on_complete_job_id = $2 where id = $1`, [waiting, fanIn]);

    await pruner({ defaults: { keepPerJob: 1 } }).p.runOnce();
    expect(await jobsLeft([job, fanIn])).toBe(2);
    const counted = await t.query(`select batch_outcome from executions where job_id = $1 and trigger = 'SCHEDULE'`, [job]);
    expect(counted.rows).toEqual([{ batch_outcome: 'SUCCEEDED' }]);
    expect(await batchesLeft([batch, waiting])).toEqual([batch, waiting].sort());
  });

  it('deletes a completed batch once its jobs are gone, and keeps one that is open, young or still has a job', async () => {
    await onlyDue('JOBS');
    const since = await lastAuditId();
    const fanIn = await oldJob(40);
    await history(fanIn, 1, 'SUCCEEDED', 40);
    const done = await oldBatch(40, { onCompleteJobId: fanIn });
    await member(done, 41);
    await member(done, 41);
    const empty = await oldBatch(50);
    const kept = await oldBatch(45);
    await member(kept, 45);
    const keptMember = await member(kept, 45, 'FAILED');
    const young = await oldBatch(3);
    const open = await oldBatch(60, { open: true });
    const keptFanIn = await oldJob(2);
    await history(keptFanIn, 1, 'SUCCEEDED', 2);
    const waiting = await oldBatch(40, { onCompleteJobId: keptFanIn });

    const { p, batches } = pruner({ batchSize: 1, defaults: { keepPerJob: 1 } });
    await p.runOnce();
    // Each round deletes at most one: the pass goes on until none is left.
    expect(await batchesLeft([done, empty, kept, young, open, waiting])).toEqual([open, kept, waiting, young].sort());
    expect(await jobsLeft([fanIn, keptMember])).toBe(1);
    const audited = (await auditedSince(since)).filter((a) => a.kind === 'JOBS');
    expect(sum(audited, 'batches')).toBe(2);
    expect(batches.reduce((a, b) => a + b.rows.batches, 0)).toBe(2);
  });
});

describe('alert notifications', () => {
  it('prunes notifications past their window and keeps the young ones', async () => {
    await onlyDue('ALERTS');
    const { rows: rules } = await t.query<{ id: string }>(
      `insert into alert_rules (workspace_id, name, condition, email) values ($1, 'prune-test', 'EXECUTION_FAILED', true) returning id`,
      [t.actor.workspaceId],
    );
    const rule = rules[0]!.id;
    const insert = (ageDays: number, n: number) =>
      t.query(
        `insert into alert_notifications (workspace_id, rule_id, condition, kind, subject_type, subject_key, window_start, first_seen_at, last_seen_at, occurrences, summary, created_at)
         select $1, $2, 'EXECUTION_FAILED', 'FIRING', 'JOB', 'k' || i, c, c, c, 1, 's', c
         from generate_series(1, $4::int) i, lateral (select now() - make_interval(days => $3::int) as c) t`,
        [t.actor.workspaceId, rule, ageDays, n],
      );
    await insert(100, 7);
    await insert(10, 2);
    const { p, batches } = pruner({ batchSize: 3, defaults: { alertNotificationsDays: 30 } });
    await p.runOnce();
    const left = await t.query(`select count(*)::int as n from alert_notifications where rule_id = $1`, [rule]);
    expect(left.rows[0].n).toBe(2);
    expect(batches.filter((b) => b.kind === 'ALERTS').reduce((a, b) => a + b.rows.alert_notifications, 0)).toBe(7);
  });
});

describe('the walk', () => {
  it('gets through more rows created in the same instant than a batch holds (one statement, one now())', async () => {
    await onlyDue('EXECUTIONS');
    const job = await newJob();
    // Ten executions with one creation time to the microsecond, as a bulk create makes them.
    const { rows } = await t.query<{ id: string }>(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, status, attempt_count, max_attempts, run_after, finished_at, created_at)
       select j.workspace_id, j.id, j.endpoint_id, now() - interval '60 days' + i * interval '1 us', 'SUCCEEDED', 1, 5, now(),
              now() - interval '59 days', now() - interval '60 days' + interval '123 us'
       from jobs j, generate_series(1, 10) i where j.id = $1 returning id`,
      [job],
    );
    const { p } = pruner({ batchSize: 3, defaults: { keepPerJob: 1 } });
    await p.runOnce();
    expect((await remaining(rows.map((r) => r.id))).executions).toBe(0);
  });

  it('a pass handed back unfinished goes on from where it got to', async () => {
    await onlyDue('JOBS');
    const jobs: string[] = [];
    for (let i = 0; i < 6; i++) {
      const job = await oldJob(45);
      await history(job, 1, 'SUCCEEDED', 45);
      jobs.push(job);
    }
    // The two oldest jobs stay (a FAILED execution in its window): a pass that started from the
    // beginning each call would read only them, a batch of two, and never get further.
    const kept = [await oldJob(47), await oldJob(46)];
    for (const job of kept) await history(job, 1, 'FAILED', 46);
    // One batch of two jobs a call: the slice is handed back after each, with its position.
    for (let call = 0; call < 10 && (await jobsLeft(jobs)) > 0; call++) {
      const report = await pruneBounded({
        pool: t.database.pool,
        log,
        pauseMs: 0,
        batchSize: 2,
        maxBatches: 1,
        workspaceId: t.actor.workspaceId,
      });
      expect(report.removed.jobs).toBeLessThanOrEqual(2);
    }
    expect(await jobsLeft(jobs)).toBe(0);
    expect(await jobsLeft(kept)).toBe(2);
  });
});

describe('what refers to what is pruned', () => {
  /** Rows that refer to an execution or a job that is gone (the pruner must leave none). */
  async function dangling() {
    const { rows } = await t.query(
      `select (select count(*) from jobs j where j.parent_execution_id is not null
                 and not exists (select 1 from executions e where e.id = j.parent_execution_id))::int as parents,
              (select count(*) from execution_children c
                 where not exists (select 1 from executions e where e.id = c.parent_execution_id))::int as turns,
              (select count(*) from job_dependencies d
                 where not exists (select 1 from jobs j where j.id = d.job_id)
                    or not exists (select 1 from jobs j where j.id = d.prerequisite_id))::int as dependencies,
              (select count(*) from batches b where b.on_complete_job_id is not null
                 and not exists (select 1 from jobs j where j.id = b.on_complete_job_id))::int as on_complete`,
    );
    return rows[0];
  }
  const none = { parents: 0, turns: 0, dependencies: 0, on_complete: 0 };
  const parentOf = async (jobId: string) =>
    (await t.query(`select parent_execution_id as p from jobs where id = $1`, [jobId])).rows[0]?.p as string | null | undefined;
  const turnRows = async (ids: string[]) =>
    (await t.query(`select parent_execution_id as id from execution_children where parent_execution_id = any($1::uuid[])`, [ids])).rows.map(
      (r) => r.id as string,
    );

  it('has no foreign key onto executions or jobs but the one from an execution to its job: the pruner sees to the rest', async () => {
    // Migration 000059. A key added here would put a trigger per deleted row back on pruning, and
    // a reference the pruner does not see to.
    const { rows } = await t.query(
      `select conrelid::regclass::text as source, conname from pg_constraint
       where contype = 'f' and confrelid in ('executions'::regclass, 'jobs'::regclass) order by conname`,
    );
    expect(rows).toEqual([{ source: 'executions', conname: 'executions_workspace_id_job_id_fkey' }]);
  });

  it("leaves a pruned execution's children without a parent, and its turn row goes with it; a kept one keeps both", async () => {
    await onlyDue('EXECUTIONS');
    const parentJob = await oldJob(40);
    const [parent] = await history(parentJob, 1, 'SUCCEEDED', 40);
    const [keptParent] = await history(parentJob, 1, 'SUCCEEDED', 5);
    const child = await oldJob(2);
    const keptChild = await oldJob(2);
    await t.query(`update jobs set parent_execution_id = $2 where id = $1`, [child, parent]);
    await t.query(`update jobs set parent_execution_id = $2 where id = $1`, [keptChild, keptParent]);
    await t.query(`insert into execution_children (parent_execution_id) values ($1), ($2)`, [parent, keptParent]);

    await pruner({ defaults: { keepPerJob: 1 } }).p.runOnce();
    expect(await remaining([parent!, keptParent!])).toEqual({ executions: 1, attempts: 1 });
    expect(await jobsLeft([child, keptChild])).toBe(2);
    expect(await parentOf(child)).toBeNull();
    expect(await parentOf(keptChild)).toBe(keptParent);
    expect(await turnRows([parent!, keptParent!])).toEqual([keptParent]);
    expect(await dangling()).toEqual(none);
  });

  it('a job or an execution being pruned cannot become a prerequisite or a parent meanwhile: the create waits, then finds it gone', async () => {
    // The locks a prune takes (LOCK_DOOMED_JOBS: the job FOR UPDATE; the executions' doomed set:
    // FOR UPDATE), held by a transaction of our own that then deletes, as a prune's would.
    const job = await oldJob(40);
    const [execution] = await history(job, 1, 'SUCCEEDED', 40);
    const pruning = await t.database.pool.connect();
    const waiting = () =>
      t.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
    try {
      await pruning.query('begin');
      await pruning.query(`select id from jobs where id = $1 for update`, [job]);
      await pruning.query(`select id from executions where id = $1 for update`, [execution]);
      const dependent = codeOf(() => t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', dependsOn: [job] }));
      const child = codeOf(() => t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', parentExecutionId: execution! }));
      // Both wait for the prune's locks (before migration 000059, their foreign keys' own locks did).
      await eventually(async () => (await waiting()).rows[0].n === 2, {}, 'both creates waiting for the prune');
      await pruning.query(`delete from attempts where execution_id = $1`, [execution]);
      await pruning.query(`delete from executions where id = $1`, [execution]);
      await pruning.query(`delete from jobs where id = $1`, [job]);
      await pruning.query('commit');
      expect(await dependent).toBe('NOT_FOUND');
      expect(await child).toBe('NOT_FOUND');
    } finally {
      await pruning.query('rollback').catch(() => {});
      pruning.release();
    }
    expect(await dangling()).toEqual(none);
  });

  it("drops a pruned job's dependencies both ways and its batch's reference to it, and unlinks its execution's children, deleting one that goes with it", async () => {
    await onlyDue('JOBS');
    const ws = t.actor.workspaceId;
    const parentJob = await oldJob(40);
    const [parent] = await history(parentJob, 1, 'SUCCEEDED', 40);
    // A child that goes in the same statement as its parent (the unlinking leaves it to the
    // delete, whatever order the statement's parts run in), and one young enough to stay.
    const goingChild = await oldJob(40);
    await history(goingChild, 1, 'SUCCEEDED', 40);
    const stayingChild = await oldJob(2);
    await history(stayingChild, 1, 'SUCCEEDED', 2);
    await t.query(`update jobs set parent_execution_id = $2 where id = any($1::uuid[])`, [[goingChild, stayingChild], parent]);
    await t.query(`insert into execution_children (parent_execution_id) values ($1)`, [parent]);
    // The parent job waited for the going child, and a young job waited for the parent job.
    const dependent = await oldJob(2);
    await history(dependent, 1, 'SUCCEEDED', 2);
    await t.query(
      `insert into job_dependencies (job_id, prerequisite_id, workspace_id, position, outcome, resolved_at)
       values ($1, $2, $4, 0, 'SUCCEEDED', now()), ($2, $3, $4, 0, 'SUCCEEDED', now())`,
      [dependent, parentJob, goingChild, ws],
    );
    // A batch completed yesterday (kept) whose onComplete job ran long ago (pruned).
    const fanIn = await oldJob(40);
    await history(fanIn, 1, 'SUCCEEDED', 40);
    const { rows } = await t.query<{ id: string }>(
      `insert into batches (workspace_id, open, completed_at, on_complete_job_id) values ($1, false, now() - interval '1 day', $2) returning id`,
      [ws, fanIn],
    );
    const batch = rows[0]!.id;

    await pruner({ defaults: { keepPerJob: 1 } }).p.runOnce();
    expect(await jobsLeft([parentJob, goingChild, fanIn])).toBe(0);
    expect(await remaining([parent!])).toEqual({ executions: 0, attempts: 0 });
    expect(await jobsLeft([stayingChild, dependent])).toBe(2);
    expect(await parentOf(stayingChild)).toBeNull();
    expect(await turnRows([parent!])).toEqual([]);
    expect(
      (await t.query(`select count(*)::int as n from job_dependencies where $1 in (job_id, prerequisite_id)`, [parentJob])).rows[0].n,
    ).toBe(0);
    expect((await t.query(`select on_complete_job_id as j from batches where id = $1`, [batch])).rows).toEqual([{ j: null }]);
    expect(await dangling()).toEqual(none);
  });
});

describe('gone workers', () => {
  it("are forgotten after their window by a live worker's presence, the others kept", async () => {
    await t.query(
      `insert into workers (id, host, pid, stale_ms, heartbeat_at) values
         ('gone-long', 'h', 1, 1000, now() - interval '3 hours'), ('gone-lately', 'h', 2, 1000, now() - interval '30 minutes')`,
    );
    const presence = createPresence({ pool: t.database.pool, log, id: 'live-one', registrations: () => [], goneWorkersMs: 2 * 3_600_000 });
    await presence.start();
    try {
      await presence.beat(); // its first beat forgets the gone ones
      const ids = (await t.query(`select id from workers where id in ('gone-long', 'gone-lately', 'live-one') order by id`)).rows.map(
        (r) => r.id,
      );
      expect(ids).toEqual(['gone-lately', 'live-one']);
    } finally {
      await presence.stop();
    }
  });
});

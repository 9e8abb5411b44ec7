/**
 * Retention settings over GraphQL: Workspace.retention shows the windows in effect, setRetention
 * (ADMIN) sets a workspace's own, audited, without touching another workspace's; the pruner
 * prunes live events by the workspace's own window, and pruneHistory counts them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/environment.js';
import { EVENTS_PER_BATCH_ROW } from '../../src/db/statements/pruning.js';
import { createLogger } from '../../src/log.js';
import { createPruner, type PrunedBatch } from '../../src/service/engine/maintenance/pruner.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;

beforeAll(async () => {
  t = await createTestDb({ retention: { executionsDays: 20, eventsHours: 48 } });
  g = createTestGateway(t);
});
afterAll(async () => {
  await g?.close();
  await t?.close();
});

const READ = `{ workspace { retention { executionsDays failedExecutionsDays auditDays runsDays eventsHours keepPerJob overrides { executionsDays failedExecutionsDays auditDays runsDays eventsHours } } } }`;
const SET = `mutation ($input: SetRetentionInput!) { setRetention(input: $input) { executionsDays failedExecutionsDays auditDays eventsHours overrides { executionsDays failedExecutionsDays auditDays eventsHours } } }`;

describe('configuration', () => {
  it('reads the windows from the environment, with documented defaults, and names a bad one', () => {
    expect(parseConfig({}).retention).toEqual({
      executionsDays: 30,
      failedExecutionsDays: 90,
      auditDays: 365,
      runsDays: 90,
      keepPerJob: 100,
      alertNotificationsDays: 90,
      batchSize: 1000,
      pauseMs: 50,
      everyMs: 600_000,
      runDueBatches: 4,
      goneWorkersHours: 24,
    });
    expect(parseConfig({ JOBGATE_RETENTION_EXECUTIONS_DAYS: '0', JOBGATE_RETENTION_FAILED_DAYS: '180' }).retention).toMatchObject({
      executionsDays: 0,
      failedExecutionsDays: 180,
    });
    expect(() => parseConfig({ JOBGATE_RETENTION_KEEP_PER_JOB: '0', JOBGATE_RETENTION_AUDIT_DAYS: 'a year' })).toThrow(
      /JOBGATE_RETENTION_KEEP_PER_JOB[\s\S]*JOBGATE_RETENTION_AUDIT_DAYS|JOBGATE_RETENTION_AUDIT_DAYS[\s\S]*JOBGATE_RETENTION_KEEP_PER_JOB/,
    );
  });
});

describe('retention settings', () => {
  it("reads the installation's defaults until the workspace sets its own", async () => {
    const res = await g.gql(READ);
    expect(res.errors).toBeUndefined();
    expect(res.data.workspace.retention).toEqual({
      executionsDays: 20,
      failedExecutionsDays: 90,
      auditDays: 365,
      runsDays: 90,
      eventsHours: 48,
      keepPerJob: 100,
      overrides: { executionsDays: null, failedExecutionsDays: null, auditDays: null, runsDays: null, eventsHours: null },
    });
  });

  it('sets, leaves omitted fields alone, returns a null one to the default, and audits each change', async () => {
    const first = await g.gql(SET, { input: { executionsDays: 7, failedExecutionsDays: 0 } });
    expect(first.errors).toBeUndefined();
    expect(first.data.setRetention).toMatchObject({
      executionsDays: 7,
      failedExecutionsDays: 0,
      auditDays: 365,
      overrides: { executionsDays: 7, failedExecutionsDays: 0, auditDays: null },
    });
    const second = await g.gql(SET, { input: { auditDays: 30, executionsDays: null } });
    expect(second.data.setRetention).toMatchObject({
      executionsDays: 20,
      failedExecutionsDays: 0,
      auditDays: 30,
      overrides: { executionsDays: null, failedExecutionsDays: 0, auditDays: 30 },
    });
    const audited = (
      await t.query(`select input, result_code, target_id from audit_log where action = 'workspace.setRetention' order by id`)
    ).rows;
    expect(audited).toEqual([
      { input: { executionsDays: 7, failedExecutionsDays: 0 }, result_code: 'OK', target_id: t.actor.workspaceId },
      { input: { auditDays: 30, executionsDays: null }, result_code: 'OK', target_id: t.actor.workspaceId },
    ]);
    // Another workspace still has the defaults.
    expect((await g.gql(READ, {}, t.otherActor)).data.workspace.retention).toMatchObject({
      executionsDays: 20,
      failedExecutionsDays: 90,
      auditDays: 365,
    });
  });

  it('refuses a window out of range with the path of the bad field, and changes nothing', async () => {
    const before = (await g.gql(READ)).data.workspace.retention;
    const res = await g.gql(SET, { input: { runsDays: -1, eventsHours: 0 } });
    expect(res.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    expect(res.errors?.[0]?.extensions?.issues.map((i: { path: string[] }) => i.path)).toEqual([['runsDays'], ['eventsHours']]);
    expect((await g.gql(READ)).data.workspace.retention).toEqual(before);
  });

  /** A pass of the pruner over every slice, as a worker's would be, with the installation's event window of 48 hours. */
  async function prunePass(batchSize = 1000): Promise<PrunedBatch[]> {
    const batches: PrunedBatch[] = [];
    await t.query(`update retention_slices set next_due_at = now(), owner = null, lease_until = null`);
    const pruner = createPruner({
      pool: t.database.pool,
      log: createLogger('warn', () => {}),
      defaults: { eventsHours: 48 },
      batchSize,
      pauseMs: 0,
      onPruned: (b) => batches.push(b),
    });
    await pruner.runOnce();
    return batches.filter((b) => b.kind === 'EVENTS');
  }

  it("the pruner prunes live events by the workspace's own window", async () => {
    const endpoint = (await t.service.registerEndpoint(t.actor, { name: 'ev.target', kind: 'HANDLER', handlerName: 'x' })).id;
    const other = (await t.service.registerEndpoint(t.otherActor, { name: 'ev.target', kind: 'HANDLER', handlerName: 'x' })).id;
    await t.service.createJob(t.actor, { endpointId: endpoint, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    await t.service.createJob(t.otherActor, { endpointId: other, kind: 'DELAYED', runAt: new Date('2999-01-01T00:00:00Z') });
    await t.query(`update events set created_at = now() - interval '3 hours'`);
    const count = async (ws: string) =>
      (await t.query(`select count(*)::int as n from events where workspace_id = $1`, [ws])).rows[0].n as number;
    expect(await g.gql(SET, { input: { eventsHours: 2 } })).not.toHaveProperty('errors');
    // The configured window (48 h) would keep both; this workspace's own (2 h) does not.
    const batches = await prunePass();
    expect(batches.map((b) => b.workspaceId)).toEqual([t.actor.workspaceId]);
    expect(batches[0]!.rows.events).toBeGreaterThan(0);
    expect(await count(t.actor.workspaceId)).toBe(0);
    expect(await count(t.otherActor.workspaceId)).toBeGreaterThan(0);
  });

  it('prunes events in bounded batches, each audited with its count, the horizon moved to the last', async () => {
    const ws = t.otherActor.workspaceId;
    // Batches of 100 rows: 1,000 events each.
    const perBatch = 100 * EVENTS_PER_BATCH_ROW;
    const n = perBatch + 37;
    await t.query(
      `insert into events (workspace_id, topic, subject_id, status, created_at)
       select $1, 'JOB', gen_random_uuid(), 'ACTIVE', now() - interval '100 hours' from generate_series(1, $2::int)`,
      [ws, n],
    );
    const newest = (await t.query(`select max(id) as id from events where workspace_id = $1`, [ws])).rows[0].id;
    const since = (await t.query(`select coalesce(max(id), 0) as id from audit_log`)).rows[0].id;
    const old = (
      await t.query(`select count(*)::int as n from events where workspace_id = $1 and created_at < now() - interval '48 hours'`, [ws])
    ).rows[0].n;
    const batches = (await prunePass(100)).filter((b) => b.workspaceId === ws).map((b) => b.rows.events);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(old);
    expect(batches).toEqual([perBatch, old - perBatch]);
    const audited = (
      await t.query(`select input from audit_log where workspace_id = $1 and action = 'retention.prune' and id > $2 order by id`, [
        ws,
        since,
      ])
    ).rows.map((r) => r.input);
    expect(audited).toEqual(batches.map((b) => ({ kind: 'EVENTS', events: b })));
    expect(Number((await t.query(`select events_pruned_through as h from workspaces where id = $1`, [ws])).rows[0].h)).toBe(Number(newest));
  });
});

const PRUNE = `mutation ($input: PruneHistoryInput) { pruneHistory(input: $input) { complete removed { jobs executions attempts runs findings auditLog alertNotifications events } } }`;

describe('pruning on demand', () => {
  /** An IMMEDIATE job that finished (SUCCEEDED) `ageDays` ago, with its one execution and attempt. */
  async function finishedOneOff(ageDays: number): Promise<string> {
    const endpoint =
      (await t.query(`select id from endpoints where workspace_id = $1 and name = 'prune.target'`, [t.actor.workspaceId])).rows[0]?.id ??
      (await t.service.registerEndpoint(t.actor, { name: 'prune.target', kind: 'HANDLER', handlerName: 'x' })).id;
    const { job } = await t.service.createJob(t.actor, { endpointId: endpoint, kind: 'IMMEDIATE' });
    await t.query(
      `update executions set status = 'SUCCEEDED', attempt_count = 1, finished_at = now() - make_interval(days => $2::int),
         created_at = now() - make_interval(days => $2::int) - interval '1 minute' where job_id = $1`,
      [job.id, ageDays],
    );
    await t.query(
      `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome)
       select workspace_id, id, 1, 1, 'w', created_at, finished_at, 'SUCCEEDED' from executions where job_id = $1`,
      [job.id],
    );
    await t.query(`update jobs set created_at = now() - make_interval(days => $2::int) - interval '2 minutes' where id = $1`, [
      job.id,
      ageDays,
    ]);
    return job.id;
  }
  const left = async (ids: string[]) =>
    (await t.query(`select count(*)::int as n from jobs where id = any($1::uuid[])`, [ids])).rows[0].n as number;

  it("removes the workspace's finished history past its window now and answers what went, audited", async () => {
    // SUCCEEDED executions are kept 20 days (the installation's window); FAILED ones forever (the
    // workspace's own, 0): a job whose executions all succeeded still goes after 20 days.
    await g.gql(SET, { input: { executionsDays: null, failedExecutionsDays: 0 } });
    const old = [await finishedOneOff(40), await finishedOneOff(41), await finishedOneOff(21)];
    const young = await finishedOneOff(3);
    const res = await g.gql(PRUNE, {});
    expect(res.errors).toBeUndefined();
    expect(res.data.pruneHistory.complete).toBe(true);
    expect(res.data.pruneHistory.removed).toMatchObject({ jobs: 3, executions: 3, attempts: 3 });
    expect(await left(old)).toBe(0);
    expect(await left([young])).toBe(1);
    const audited = (await t.query(`select result_code, target_id from audit_log where action = 'workspace.pruneHistory' order by id`))
      .rows;
    expect(audited).toEqual([{ result_code: 'OK', target_id: t.actor.workspaceId }]);
    // Nothing more to do: a second call removes nothing.
    expect((await g.gql(PRUNE, { input: { maxBatches: 5 } })).data.pruneHistory.removed.jobs).toBe(0);
  });

  it("removes the workspace's live events past its window too, and counts them", async () => {
    await t.query(
      `insert into events (workspace_id, topic, subject_id, status, created_at)
       select $1, 'JOB', gen_random_uuid(), 'ACTIVE', now() - interval '100 hours' from generate_series(1, 25)`,
      [t.actor.workspaceId],
    );
    const res = await g.gql(PRUNE, {});
    expect(res.errors).toBeUndefined();
    expect(res.data.pruneHistory.removed.events).toBe(25);
    expect(
      (
        await t.query(`select count(*)::int as n from events where workspace_id = $1 and created_at < now() - interval '48 hours'`, [
          t.actor.workspaceId,
        ])
      ).rows[0].n,
    ).toBe(0);
  });

  it('leaves other workspaces alone', async () => {
    const ws = t.otherActor.workspaceId;
    const endpoint = (await t.service.registerEndpoint(t.otherActor, { name: 'prune.other', kind: 'HANDLER', handlerName: 'x' })).id;
    const { job } = await t.service.createJob(t.otherActor, { endpointId: endpoint, kind: 'IMMEDIATE' });
    await t.query(
      `update executions set status = 'SUCCEEDED', finished_at = now() - interval '50 days', created_at = now() - interval '51 days' where job_id = $1`,
      [job.id],
    );
    await t.query(`update jobs set created_at = now() - interval '52 days' where id = $1`, [job.id]);
    expect((await g.gql(PRUNE, {})).data.pruneHistory.removed.jobs).toBe(0);
    expect(await left([job.id])).toBe(1);
    expect((await g.gql(PRUNE, {}, t.otherActor)).data.pruneHistory.removed.jobs).toBe(1);
    expect(await left([job.id])).toBe(0);
    expect(ws).not.toBe(t.actor.workspaceId);
  });

  it('stops at maxBatches and says it is not complete', async () => {
    const jobs = [await finishedOneOff(30), await finishedOneOff(30), await finishedOneOff(30)];
    expect(jobs).toHaveLength(3);
    // The test database's batches are the installation's (1,000 rows): one batch prunes one slice's
    // first batch only, so with several kinds to look at one batch cannot finish.
    const res = await g.gql(PRUNE, { input: { maxBatches: 1 } });
    expect(res.errors).toBeUndefined();
    expect(res.data.pruneHistory.complete).toBe(false);
  });

  it('is refused below ADMIN, audited with its code, and removes nothing', async () => {
    const job = await finishedOneOff(40);
    for (const role of ['OPERATOR', 'VIEWER'] as const) {
      const res = await g.gql(PRUNE, {}, { ...t.actor, role });
      expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    }
    expect(await left([job])).toBe(1);
    const refused = (
      await t.query(`select result_code from audit_log where action = 'workspace.pruneHistory' and result_code <> 'OK' order by id`)
    ).rows.map((r) => r.result_code);
    expect(refused).toEqual(['FORBIDDEN', 'FORBIDDEN']);
  });

  it('refuses a bad maxBatches with its path, and removes nothing', async () => {
    const job = await finishedOneOff(40);
    const res = await g.gql(PRUNE, { input: { maxBatches: 0 } });
    expect(res.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    expect(res.errors?.[0]?.extensions?.issues.map((i: { path: string[] }) => i.path)).toEqual([['maxBatches']]);
    expect(await left([job])).toBe(1);
  });
});

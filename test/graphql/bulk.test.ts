/**
 * Bulk actions over GraphQL: the dead-letter view's "retry all that match", cancel many, pause
 * and resume many. Each item gets what its single action does, with its audit row; the whole is
 * bounded and audited; an id given twice is one item; 1,000 items go in one call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let h: EngineHarness;
let healthy = false;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  h = engineHarness(t);
  h.handle('fragile', () => {
    if (!healthy) throw new UnrecoverableError('down');
  });
  await t.service.registerEndpoint(t.actor, { name: 'bulk.fragile', kind: 'HANDLER', handlerName: 'fragile', maxAttempts: 1 });
  await t.service.registerEndpoint(t.actor, { name: 'bulk.idle', kind: 'HANDLER', handlerName: 'nobody' });
  await t.service.registerEndpoint(t.actor, { name: 'bulk.many', kind: 'HANDLER', handlerName: 'nobody' });
  await t.service.registerEndpoint(t.otherActor, { name: 'bulk.elsewhere', kind: 'HANDLER', handlerName: 'nobody' });
  await h.worker();
});
afterAll(async () => {
  await h.stopAll();
  await t.close();
});

const count = async (sql: string, values: unknown[] = []) => (await t.query(sql, values)).rows[0].n as number;

describe('bulk actions', () => {
  it('re-drives every FAILED execution matching the filter, at most `limit` a call, until none is left', async () => {
    const endpointId = (await g.gql('{ endpoint(name: "bulk.fragile") { id } }')).data.endpoint.id;
    for (let i = 0; i < 5; i++) await t.service.createJob(t.actor, { endpointName: 'bulk.fragile', kind: 'IMMEDIATE', input: { i } });
    await eventually(
      async () => (await count(`select count(*)::int as n from executions where status = 'FAILED'`)) === 5,
      10_000,
      'five failures',
    );
    healthy = true;
    const first = await g.gql(
      `mutation { retryExecutions(filter: { endpointId: "${endpointId}" }, limit: 3) { matched changed skipped { id } more } }`,
    );
    expect(first.data.retryExecutions).toEqual({ matched: 3, changed: 3, skipped: [], more: true });
    const rest = await g.gql(
      `mutation { retryExecutions(filter: { endpointId: "${endpointId}", statuses: [FAILED, PENDING] }) { matched changed more } }`,
    );
    expect(rest.data.retryExecutions).toEqual({ matched: 2, changed: 2, more: false });
    await eventually(
      async () => (await count(`select count(*)::int as n from executions where status = 'SUCCEEDED'`)) === 5,
      10_000,
      'five successes',
    );
    // One audit row for each selection, one per item.
    expect(await count(`select count(*)::int as n from audit_log where action = 'executions.retry-many' and result_code = 'OK'`)).toBe(2);
    expect(await count(`select count(*)::int as n from audit_log where action = 'execution.retry' and result_code = 'OK'`)).toBe(5);
  });

  it("cancels the pending executions matching a filter and says which it left, with the single action's code", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { job } = await t.service.createJob(t.actor, {
        endpointName: 'bulk.idle',
        kind: 'DELAYED',
        runAt: new Date(Date.now() + 3_600_000),
      });
      ids.push(job.id);
    }
    const res = await g.gql(`mutation { cancelExecutions(filter: { jobId: "${ids[0]}" }) { matched changed } }`);
    expect(res.data.cancelExecutions).toEqual({ matched: 1, changed: 1 });
    const again = await g.gql(`mutation { cancelExecutions(filter: { jobId: "${ids[0]}" }) { matched changed } }`);
    expect(again.data.cancelExecutions).toEqual({ matched: 0, changed: 0 });
    // Pause two jobs and a retired one: the retired one is skipped with RETIRED, the others change.
    await t.service.cancelJob(t.actor, ids[2]!);
    const paused = await g.gql(
      `mutation { pauseJobs(ids: ["${ids[0]}", "${ids[1]}", "${ids[2]}"]) { matched changed skipped { id code } } }`,
    );
    expect(paused.data.pauseJobs.changed).toBe(2);
    expect(paused.data.pauseJobs.skipped).toEqual([{ id: ids[2], code: 'RETIRED' }]);
    expect(await count(`select count(*)::int as n from jobs where id = any($1) and status = 'PAUSED'`, [ids])).toBe(2);
    const resumed = await g.gql(`mutation { resumeJobs(ids: ["${ids[0]}", "${ids[1]}"]) { changed } }`);
    expect(resumed.data.resumeJobs.changed).toBe(2);
  });

  it('refuses a limit past 1000 or an empty id list with VALIDATION_FAILED, changing nothing', async () => {
    const before = await count('select count(*)::int as n from executions where status = $1', ['PENDING']);
    const big = await g.gql('mutation { cancelExecutions(limit: 5000) { matched } }');
    expect(big.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['limit'] }] });
    const none = await g.gql('mutation { pauseJobs(ids: []) { matched } }');
    expect(none.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await count('select count(*)::int as n from executions where status = $1', ['PENDING'])).toBe(before);
  });
});

describe('bulk actions on a selection', () => {
  it('cancels exactly the selected executions (filter.ids), leaving the others of the same filter', async () => {
    const jobs = [await laterJob('bulk.idle'), await laterJob('bulk.idle'), await laterJob('bulk.idle')];
    const { rows } = await t.query('select id, job_id from executions where job_id = any($1)', [jobs]);
    const byJob = new Map(rows.map((r) => [r.job_id as string, r.id as string]));
    const chosen = [byJob.get(jobs[0]!)!, byJob.get(jobs[2]!)!];
    const listed = await g.gql(`query ($ids: [ID!]) { executions(filter: { ids: $ids }) { totalCount nodes { id } } }`, { ids: chosen });
    expect(listed.data.executions.totalCount).toBe(2);
    const res = await g.gql(`mutation ($ids: [ID!]) { cancelExecutions(filter: { ids: $ids }, limit: 1000) { matched changed } }`, {
      ids: chosen,
    });
    expect(res.data.cancelExecutions).toEqual({ matched: 2, changed: 2 });
    const statuses = await t.query('select job_id, status from executions where job_id = any($1)', [jobs]);
    expect(Object.fromEntries(statuses.rows.map((r) => [r.job_id, r.status]))).toEqual({
      [jobs[0]!]: 'CANCELLED',
      [jobs[1]!]: 'PENDING',
      [jobs[2]!]: 'CANCELLED',
    });
  });

  it('takes every execution named by id, saying why one is not taken (its status, or not matching the rest of the filter), instead of matching nothing', async () => {
    const jobs = [await laterJob('bulk.idle'), await laterJob('bulk.idle'), await laterJob('bulk.idle')];
    const { rows } = await t.query('select id, job_id from executions where job_id = any($1)', [jobs]);
    const byJob = new Map(rows.map((r) => [r.job_id as string, r.id as string]));
    const [pendingId, cancelledId, thirdId] = jobs.map((j) => byJob.get(j)!);
    await t.service.cancelExecution(t.actor, cancelledId!);
    const missing = '00000000-0000-4000-8000-000000000000';
    const retried = await g.gql(
      `mutation ($ids: [ID!]) { retryExecutions(filter: { ids: $ids }) { matched changed more skipped { id code message } } }`,
      { ids: [pendingId, cancelledId, missing] },
    );
    expect(retried.data.retryExecutions).toEqual({
      matched: 3,
      changed: 0,
      more: false,
      // In the order given.
      skipped: [
        { id: pendingId, code: 'CONFLICT', message: expect.stringMatching(/only FAILED executions can be retried; .* is PENDING/) },
        { id: cancelledId, code: 'CONFLICT', message: expect.stringMatching(/is CANCELLED/) },
        { id: missing, code: 'NOT_FOUND', message: expect.any(String) },
      ],
    });
    // Past the limit, every named one is taken in one call: calling again while `more` ends.
    const cancelled = await g.gql(
      `mutation ($ids: [ID!]) { cancelExecutions(filter: { ids: $ids }, limit: 1) { matched changed more skipped { id code } } }`,
      { ids: [cancelledId, pendingId, thirdId] },
    );
    expect(cancelled.data.cancelExecutions).toEqual({
      matched: 3,
      changed: 2,
      more: false,
      skipped: [{ id: cancelledId, code: 'CONFLICT' }],
    });
    // One the rest of the filter leaves out is NOT_FOUND, and stays as it was.
    await t.service.registerEndpoint(t.actor, { name: 'bulk.other', kind: 'HANDLER', handlerName: 'nobody' });
    const other = await laterJob('bulk.other');
    const otherId = (await t.query('select id from executions where job_id = $1', [other])).rows[0].id as string;
    const idleEndpoint = (await g.gql('{ endpoint(name: "bulk.idle") { id } }')).data.endpoint.id;
    const narrowed = await g.gql(
      `mutation ($ids: [ID!], $endpoint: ID) { cancelExecutions(filter: { ids: $ids, endpointId: $endpoint }) { matched changed skipped { id code } } }`,
      { ids: [otherId], endpoint: idleEndpoint },
    );
    expect(narrowed.data.cancelExecutions).toEqual({ matched: 1, changed: 0, skipped: [{ id: otherId, code: 'NOT_FOUND' }] });
    expect((await t.query('select status from executions where id = $1', [otherId])).rows[0].status).toBe('PENDING');
    // A status in the filter keeps it a filter: what is not in it is not matched (through the
    // library, `status` as `statuses`).
    const filtered = await g.gql(
      `mutation ($ids: [ID!]) { cancelExecutions(filter: { ids: $ids, statuses: [FAILED] }) { matched changed skipped { id } } }`,
      {
        ids: [otherId],
      },
    );
    expect(filtered.data.cancelExecutions).toEqual({ matched: 0, changed: 0, skipped: [] });
    const single = await t.service.cancelExecutions(t.actor, { filter: { ids: [otherId], status: 'SUCCEEDED' } });
    expect(single).toMatchObject({ matched: 0, changed: 0, skipped: [] });
    expect((await t.query('select status from executions where id = $1', [otherId])).rows[0].status).toBe('PENDING');
  });

  it("cancels many jobs as cancelJob would: retired, their pending executions cancelled, another workspace's and a retired one skipped", async () => {
    const mine = [await laterJob('bulk.idle'), await laterJob('bulk.idle')];
    const retired = await laterJob('bulk.idle');
    await t.service.cancelJob(t.actor, retired);
    const theirs = await laterJob('bulk.elsewhere', t.otherActor);
    const res = await g.gql(`mutation ($ids: [ID!]!) { cancelJobs(ids: $ids) { matched changed skipped { id code } more } }`, {
      ids: [...mine, retired, theirs, mine[0]],
    });
    expect(res.data.cancelJobs).toEqual({
      matched: 4,
      changed: 2,
      skipped: [
        { id: retired, code: 'RETIRED' },
        { id: theirs, code: 'NOT_FOUND' },
      ],
      more: false,
    });
    expect(await count(`select count(*)::int as n from jobs where id = any($1) and status = 'RETIRED'`, [mine])).toBe(2);
    expect(await count(`select count(*)::int as n from executions where job_id = any($1) and status = 'CANCELLED'`, [mine])).toBe(2);
    expect(await count(`select count(*)::int as n from jobs where id = $1 and status = 'ACTIVE'`, [theirs])).toBe(1);
    expect(await count(`select count(*)::int as n from audit_log where action = 'jobs.cancel-many'`)).toBe(1);
    expect(await count(`select count(*)::int as n from audit_log where action = 'job.cancel' and target_id = any($1)`, [mine])).toBe(2);
  });

  it('refuses an empty or oversized selection with VALIDATION_FAILED, changing nothing', async () => {
    const job = await laterJob('bulk.idle');
    const none = await g.gql('mutation { cancelJobs(ids: []) { matched } }');
    expect(none.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['ids'] }] });
    const tooMany = Array.from({ length: 1001 }, () => job);
    const big = await g.gql(`mutation ($ids: [ID!]!) { cancelJobs(ids: $ids) { matched } }`, { ids: tooMany });
    expect(big.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    const emptyFilter = await g.gql('mutation { retryExecutions(filter: { ids: [] }) { matched } }');
    expect(emptyFilter.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['filter', 'ids'] }] });
    expect(await count(`select count(*)::int as n from jobs where id = $1 and status = 'ACTIVE'`, [job])).toBe(1);
  });
});

/** A job on `endpointName` whose one execution is due in an hour (no worker takes it meanwhile). */
async function laterJob(endpointName: string, actor = t.actor): Promise<string> {
  const { job } = await t.service.createJob(actor, { endpointName, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
  return job.id;
}

const PAUSE = `mutation ($ids: [ID!]!) { pauseJobs(ids: $ids) { matched changed skipped { id code message } more } }`;
const RESUME = `mutation ($ids: [ID!]!) { resumeJobs(ids: $ids) { matched changed skipped { id code } } }`;

describe('bulk actions on many ids', () => {
  it('treats an id given 1,000 times as one item: changed once, one audit row, one event', async () => {
    const id = await laterJob('bulk.idle');
    const copies = Array.from({ length: 1000 }, () => id);
    const paused = await g.gql(PAUSE, { ids: copies });
    expect(paused.data.pauseJobs).toEqual({ matched: 1, changed: 1, skipped: [], more: false });
    expect(await count(`select count(*)::int as n from audit_log where action = 'job.pause' and target_id = $1`, [id])).toBe(1);
    expect(await count(`select count(*)::int as n from events where subject_id = $1 and status = 'PAUSED'`, [id])).toBe(1);
    const resumed = await g.gql(RESUME, { ids: copies });
    expect(resumed.data.resumeJobs).toEqual({ matched: 1, changed: 1, skipped: [] });
    expect(await count(`select count(*)::int as n from audit_log where action = 'job.resume' and target_id = $1`, [id])).toBe(1);
  });

  it('reports each refused item once, in the order given, with the code its single action gives, and changes the rest', async () => {
    const mine = [await laterJob('bulk.idle'), await laterJob('bulk.idle')];
    const retired = await laterJob('bulk.idle');
    await t.service.cancelJob(t.actor, retired);
    const elsewhere = await laterJob('bulk.elsewhere', t.otherActor);
    const reaper = (
      await t.query(
        `select j.id from jobs j join endpoints e on e.id = j.endpoint_id where e.name = 'jobgate.reaper' and j.workspace_id = $1`,
        [t.actor.workspaceId],
      )
    ).rows[0].id as string;
    const garbage = 'not-a-job';
    const ids = [elsewhere, mine[0], retired, reaper, garbage, mine[1], retired, elsewhere, mine[0]];
    const res = await g.gql(PAUSE, { ids });
    expect(res.data.pauseJobs.matched).toBe(6);
    expect(res.data.pauseJobs.changed).toBe(2);
    expect(res.data.pauseJobs.skipped.map((s: { id: string; code: string }) => [s.id, s.code])).toEqual([
      [elsewhere, 'NOT_FOUND'],
      [retired, 'RETIRED'],
      [reaper, 'FORBIDDEN'],
      [garbage, 'NOT_FOUND'],
    ]);
    // The other workspace's job is not leaked: its refusal reads as an id that does not exist.
    expect(res.data.pauseJobs.skipped[0].message).toBe(res.data.pauseJobs.skipped[3].message.replace(garbage, elsewhere));
    expect(await count(`select count(*)::int as n from jobs where id = any($1) and status = 'PAUSED'`, [mine])).toBe(2);
    expect(await count(`select count(*)::int as n from jobs where id = $1 and status = 'ACTIVE'`, [elsewhere])).toBe(1);
    expect(await count(`select count(*)::int as n from jobs where id = $1 and status = 'ACTIVE'`, [reaper])).toBe(1);
    // One audit row per distinct item, with its outcome, as the single actions write them.
    const { rows } = await t.query(
      `select target_id, result_code from audit_log where action = 'job.pause' and target_id = any($1) order by id`,
      [[...new Set(ids)]],
    );
    expect(rows.map((r) => [r.target_id, r.result_code])).toEqual([
      [elsewhere, 'NOT_FOUND'],
      [mine[0], 'OK'],
      [retired, 'RETIRED'],
      [reaper, 'FORBIDDEN'],
      [garbage, 'NOT_FOUND'],
      [mine[1], 'OK'],
    ]);
  });

  it(
    'pauses, resumes, cancels and re-drives 1,000 items in one call each, each audited and each with its event',
    { timeout: 120_000 },
    async () => {
      const ids: string[] = [];
      for (let i = 0; i < 1000; i += 50) ids.push(...(await Promise.all(Array.from({ length: 50 }, () => laterJob('bulk.many')))));
      const audited = (action: string) =>
        count(`select count(*)::int as n from audit_log where action = $1 and result_code = 'OK' and target_id = any($2)`, [action, ids]);
      const jobsIn = (status: string) => count(`select count(*)::int as n from jobs where id = any($1) and status = $2`, [ids, status]);
      const jobEvents = (from: string, to: string) =>
        count(
          `select count(*)::int as n from events where topic = 'JOB' and subject_id = any($1) and previous_status = $2 and status = $3`,
          [ids, from, to],
        );

      expect((await g.gql(PAUSE, { ids })).data.pauseJobs).toEqual({ matched: 1000, changed: 1000, skipped: [], more: false });
      expect(await jobsIn('PAUSED')).toBe(1000);
      expect(await audited('job.pause')).toBe(1000);
      expect(await jobEvents('ACTIVE', 'PAUSED')).toBe(1000);

      expect((await g.gql(RESUME, { ids })).data.resumeJobs).toEqual({ matched: 1000, changed: 1000, skipped: [] });
      expect(await jobsIn('ACTIVE')).toBe(1000);
      expect(await audited('job.resume')).toBe(1000);
      expect(await jobEvents('PAUSED', 'ACTIVE')).toBe(1000);
      const endpointId = (await g.gql('{ endpoint(name: "bulk.many") { id } }')).data.endpoint.id;
      const executions = (await t.query(`select id from executions where job_id = any($1)`, [ids])).rows.map((r) => r.id as string);
      const executionAudits = (action: string) =>
        count(`select count(*)::int as n from audit_log where action = $1 and result_code = 'OK' and target_id = any($2)`, [
          action,
          executions,
        ]);

      const cancelled = await g.gql(
        `mutation { cancelExecutions(filter: { endpointId: "${endpointId}" }, limit: 1000) { matched changed skipped { id } more } }`,
      );
      expect(cancelled.data.cancelExecutions).toEqual({ matched: 1000, changed: 1000, skipped: [], more: false });
      expect(await count(`select count(*)::int as n from executions where id = any($1) and status = 'CANCELLED'`, [executions])).toBe(1000);
      expect(await executionAudits('execution.cancel')).toBe(1000);

      // A thousand FAILED executions to re-drive: made so here (a worker would take minutes to fail them).
      await t.query(`update executions set status = 'FAILED', last_error = 'down' where id = any($1)`, [executions]);
      const retried = await g.gql(
        `mutation { retryExecutions(filter: { endpointId: "${endpointId}" }, limit: 1000) { matched changed skipped { id } more } }`,
      );
      expect(retried.data.retryExecutions).toEqual({ matched: 1000, changed: 1000, skipped: [], more: false });
      expect(await executionAudits('execution.retry')).toBe(1000);
      expect(
        await count(
          `select count(*)::int as n from events where topic = 'EXECUTION' and subject_id = any($1) and previous_status = 'FAILED' and status = 'PENDING'`,
          [executions],
        ),
      ).toBe(1000);
    },
  );
});

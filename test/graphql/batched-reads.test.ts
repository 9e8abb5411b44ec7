/**
 * A page's reads do not grow with its size: the links and permissions each row asks for (an
 * execution's job, attempts and viewerCan, a job's endpoint, lastExecution, scheduledExecution,
 * completesBatch, state, alertsOptOut and viewerCan) are read together, one query per step for the whole page
 * (src/service/kernel/batched-reads.ts), and answer what a read of their own would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchedFirstPages } from '../../src/service/kernel/batched-reads.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let checkouts = 0;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  await t.service.registerEndpoint(t.actor, { name: 'pages.idle', kind: 'HANDLER', handlerName: 'nobody' });
  // 30 one-off jobs, and a delayed one triggered twice more: its newest execution is the last trigger.
  await t.service.createJobs(
    t.actor,
    Array.from({ length: 30 }, (_, i) => ({ endpointName: 'pages.idle', kind: 'IMMEDIATE' as const, name: `page-${i}` })),
  );
  const { job } = await t.service.createJob(t.actor, {
    endpointName: 'pages.idle',
    kind: 'DELAYED',
    name: 'triggered',
    runAt: new Date(Date.now() + 86_400_000),
  });
  await t.service.triggerJob(t.actor, { id: job.id, force: true });
  await t.service.triggerJob(t.actor, { id: job.id, force: true });
  // Some executions with ended attempts (i of them for the i-th), one job opted out of alerts.
  await t.query(
    `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome, error)
     select e.workspace_id, e.id, n, n, 'w-' || n, now() - interval '1 minute', now() - interval '1 minute' + n * interval '1 second', 'FAILED', 'boom ' || n
     from (select e.*, row_number() over (order by j.name) as k from executions e join jobs j on j.id = e.job_id where j.name like 'page-%') e
     cross join generate_series(1, 3) n where n <= e.k % 4`,
  );
  await t.query(`update jobs set alerts_opt_out = true where name in ('page-7', 'page-8')`);
  t.database.pool.on('acquire', () => checkouts++);
});
afterAll(async () => {
  await g.close();
  await t.close();
});

/** Connections the pool handed out (one per statement outside a transaction) while `query` ran. */
async function reads(query: string, as = t.actor): Promise<{ count: number; data: any }> {
  const before = checkouts;
  const res = await g.gql(query, undefined, as);
  expect(res.errors).toBeUndefined();
  return { count: checkouts - before, data: res.data };
}

const EXECUTIONS = (n: number) =>
  `{ executions(first: ${n}) { nodes { id job { id name } attempts { attemptNumber error } viewerCan { retry cancel } } } }`;
const JOBS = (n: number) =>
  `{ jobs(first: ${n}) { nodes { id name state endpoint { id name } alertsOptOut lastExecution { id createdAt } scheduledExecution { id trigger } completesBatch { id } viewerCan { trigger cancel } } } }`;

describe('a page of rows with their links', () => {
  it('costs as many reads for 30 executions as for 3, with each row its own job and permissions', async () => {
    for (const actor of [t.actor, { ...t.actor, role: 'OPERATOR' as const }, { ...t.actor, role: 'VIEWER' as const }]) {
      const small = await reads(EXECUTIONS(3), actor);
      const large = await reads(EXECUTIONS(30), actor);
      expect(large.data.executions.nodes).toHaveLength(30);
      expect({ role: actor.role, reads: large.count }).toEqual({ role: actor.role, reads: small.count });
      expect(large.data.executions.nodes.some((e: any) => e.attempts.length > 1)).toBe(true);
      for (const e of large.data.executions.nodes) {
        const row = (await t.query('select job_id from executions where id = $1', [e.id])).rows[0];
        expect(e.job.id).toBe(row.job_id);
        const attempts = (
          await t.query('select attempt_number, error from attempts where execution_id = $1 order by attempt_number', [e.id])
        ).rows;
        expect(e.attempts).toEqual(attempts.map((a) => ({ attemptNumber: a.attempt_number, error: a.error })));
        // As a read of its own answers (one at a time: a batch of one).
        expect(e.viewerCan).toEqual(await t.service.executionPermissions(actor, e.id));
      }
    }
  });

  it('costs as many reads for 30 jobs as for 3, each with its own newest and scheduled execution, batch it completes and state', async () => {
    const small = await reads(JOBS(3));
    const large = await reads(JOBS(30));
    expect(large.data.jobs.nodes).toHaveLength(30);
    expect(large.count).toBe(small.count);
    for (const j of large.data.jobs.nodes) {
      const newest = (await t.query('select id from executions where job_id = $1 order by created_at desc, id desc limit 1', [j.id]))
        .rows[0];
      expect(j.lastExecution?.id).toBe(newest?.id);
      const scheduled = (await t.query(`select id from executions where job_id = $1 and trigger = 'SCHEDULE'`, [j.id])).rows[0];
      expect(j.scheduledExecution).toEqual({ id: scheduled.id, trigger: 'SCHEDULE' });
      expect(j.completesBatch).toBeNull();
      expect(j.state).toBe('ACTIVE');
      const linked = (
        await t.query('select e.id, e.name, j.alerts_opt_out from jobs j join endpoints e on e.id = j.endpoint_id where j.id = $1', [j.id])
      ).rows[0];
      expect(j.endpoint).toEqual({ id: linked.id, name: linked.name });
      expect(j.alertsOptOut).toBe(linked.alerts_opt_out);
      const own = await t.service.jobPermissions(t.actor, j.id);
      expect(j.viewerCan).toEqual({ trigger: own.trigger, cancel: own.cancel });
    }
    // Both answers of alertsOptOut, and executions with 0 to 3 attempts, were among the rows.
    expect(new Set(large.data.jobs.nodes.map((j: any) => j.alertsOptOut))).toEqual(new Set([true, false]));
    const triggered = large.data.jobs.nodes.find((j: any) => j.name === 'triggered');
    // Triggered twice: its newest execution is the last trigger, its scheduled one the one it was created with.
    expect(triggered.scheduledExecution.id).not.toBe(triggered.lastExecution.id);
  });
});

describe('a page of endpoints with their payload specs and configs', () => {
  it('costs as many reads for 30 endpoints as for 3, each with its own spec and config', async () => {
    for (let i = 0; i < 30; i++) {
      const spec = await t.service.createPayloadSpec(t.actor, { name: `pages.spec${i}`, jsonSchema: { type: 'object' } });
      const config = await t.service.setConfig(t.actor, { name: `pages.conf${i}`, entries: [{ key: 'k', value: `v${i}` }] });
      await t.service.registerEndpoint(t.actor, {
        name: `pages.ep${i}`,
        kind: 'HANDLER',
        handlerName: 'nobody',
        ...(i % 3 === 0 ? {} : { payloadSpecId: spec.id, configId: config.id }),
      });
    }
    const ENDPOINTS = (n: number) => `{ endpoints(first: ${n}) { nodes { id payloadSpec { id name } config { id name } } } }`;
    const small = await reads(ENDPOINTS(3));
    const large = await reads(ENDPOINTS(30));
    expect(large.data.endpoints.nodes).toHaveLength(30);
    expect(large.count).toBe(small.count);
    let linked = 0;
    for (const e of large.data.endpoints.nodes) {
      const own = (
        await t.query(
          `select s.id as spec_id, s.name as spec_name, c.id as config_id, c.name as config_name
           from endpoints e left join payload_specs s on s.id = e.payload_spec_id left join configs c on c.id = e.config_id where e.id = $1`,
          [e.id],
        )
      ).rows[0];
      expect(e.payloadSpec).toEqual(own.spec_id ? { id: own.spec_id, name: own.spec_name } : null);
      expect(e.config).toEqual(own.config_id ? { id: own.config_id, name: own.config_name } : null);
      if (own.spec_id) linked++;
    }
    expect(linked).toBeGreaterThan(10);
  });
});

describe('a page of runs with their finding counts', () => {
  it('costs as many reads for 30 runs as for 3, each with its own counts', async () => {
    for (let i = 0; i < 30; i++) {
      const { run } = await t.service.triggerRun(t.actor, { name: `pages.scan${i}`, force: true });
      // i findings, of two kinds and two severities.
      for (let k = 0; k < i % 5; k++)
        await t.query(`insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, $3, $4, $5)`, [
          t.actor.workspaceId,
          run.id,
          k % 2 ? 'odd' : 'even',
          k % 2 ? 'WARNING' : 'INFO',
          `r-${k}`,
        ]);
    }
    const RUNS = (n: number) => `{ runConnection(first: ${n}) { nodes { id findingCounts { kind severity count } } } }`;
    const small = await reads(RUNS(3));
    const large = await reads(RUNS(30));
    expect(large.data.runConnection.nodes).toHaveLength(30);
    expect(large.count).toBe(small.count);
    for (const r of large.data.runConnection.nodes) {
      const own = await t.query(
        `select kind, severity, count(*)::int as count from findings where run_id = $1 group by kind, severity order by kind, severity`,
        [r.id],
      );
      expect(r.findingCounts).toEqual(own.rows);
    }
    expect(new Set(large.data.runConnection.nodes.map((r: any) => r.findingCounts.length))).toEqual(new Set([0, 1, 2]));
  });

  it("costs as many reads for 30 runs' first pages of findings as for 3, each as the run's own page reads it", async () => {
    // The runs and findings of the test before: run i has i % 5 findings, kinds even and odd in turn.
    for (const [args, first, kind, severity] of [
      ['first: 2', 2, null, null],
      ['first: 1, kind: "odd"', 1, 'odd', null],
      ['first: 3, severity: INFO', 3, null, 'INFO'],
    ] as const) {
      const RUNS = (n: number) =>
        `{ runConnection(first: ${n}) { nodes { id findingConnection(${args}) { totalCount nodes { id kind severity } pageInfo { hasNextPage } } } } }`;
      const small = await reads(RUNS(3));
      const large = await reads(RUNS(30));
      expect({ args, reads: large.count }).toEqual({ args, reads: small.count });
      for (const r of large.data.runConnection.nodes) {
        // The deprecated page reads one run's findings the way the connection did before.
        const own = await t.service.findings(t.actor, r.id, { first, kind, severity });
        const matching = await t.query<{ n: number }>(
          `select count(*)::int as n from findings where run_id = $1 and ($2::text is null or kind = $2) and ($3::text is null or severity = $3)`,
          [r.id, kind, severity],
        );
        expect({ args, page: r.findingConnection }).toEqual({
          args,
          page: {
            totalCount: matching.rows[0]!.n,
            nodes: own.findings.map((f) => ({ id: f.id, kind: f.kind, severity: f.severity })),
            pageInfo: { hasNextPage: own.nextCursor !== null },
          },
        });
      }
      expect(new Set(large.data.runConnection.nodes.map((r: any) => r.findingConnection.totalCount)).size).toBeGreaterThan(1);
    }
  });
});

describe("a federation router's references", () => {
  it('cost as many reads for 30 jobs as for 3 (one query per type), each the job of its id', async () => {
    const ids = (await t.query<{ id: string }>(`select id from jobs where name like 'page-%' order by name`)).rows.map((r) => r.id);
    const entities = (n: number) =>
      `{ _entities(representations: [${ids
        .slice(0, n)
        .map((id) => `{ __typename: "Job", id: "${id}" }`)
        .join(', ')}]) { ... on Job { id name } } }`;
    const small = await reads(entities(3));
    const large = await reads(entities(30));
    expect(large.count).toBe(small.count);
    expect(large.data._entities.map((j: { id: string }) => j.id)).toEqual(ids.slice(0, 30));
  });
});

describe("a page of rows with a first page of their own (a job's executions, an endpoint's jobs)", () => {
  const JOBS_WITH_RUNS = (n: number, args: string) =>
    `{ jobs(first: ${n}, filter: { search: "nest-" }) { nodes { id name executions(${args}) { totalCount nodes { id status } pageInfo { hasNextPage endCursor } } } } }`;
  const endpointIds: string[] = [];

  beforeAll(async () => {
    // 12 jobs on three endpoints, with 1 to 6 executions (0 to 5 "Run now"s), some of them cancelled.
    for (let e = 0; e < 3; e++)
      endpointIds.push((await t.service.registerEndpoint(t.actor, { name: `nest.ep${e}`, kind: 'HANDLER', handlerName: 'nobody' })).id);
    for (let i = 0; i < 12; i++) {
      const { job } = await t.service.createJob(t.actor, {
        endpointName: `nest.ep${i % 3}`,
        kind: 'DELAYED',
        name: `nest-${String(i).padStart(2, '0')}`,
        runAt: new Date(Date.now() + 86_400_000),
      });
      for (let k = 0; k < i % 6; k++) await t.service.triggerJob(t.actor, { id: job.id, force: true });
    }
    await t.query(
      `update executions set status = 'CANCELLED', finished_at = now()
       where job_id in (select id from jobs where name like 'nest-%') and trigger = 'MANUAL' and ctid in (
         select ctid from executions where trigger = 'MANUAL' order by id limit 15)`,
    );
  });

  /** The job's executions as the root list answers them, one job at a time. */
  async function alone(jobId: string, args: string) {
    const res = await g.gql(
      `{ executions(jobId: "${jobId}", ${args}) { totalCount nodes { id status } pageInfo { hasNextPage endCursor } } }`,
    );
    expect(res.errors).toBeUndefined();
    return (res.data as any).executions;
  }

  it('costs as many reads for 12 jobs as for 2, each page, count and cursor as the job alone would have them', async () => {
    for (const args of ['first: 3', 'first: 2, status: PENDING', 'first: 1, status: CANCELLED']) {
      const small = await reads(JOBS_WITH_RUNS(2, args));
      const large = await reads(JOBS_WITH_RUNS(12, args));
      expect(large.data.jobs.nodes).toHaveLength(12);
      expect({ args, reads: large.count }).toEqual({ args, reads: small.count });
      for (const j of large.data.jobs.nodes)
        expect({ job: j.name, ...j.executions }).toEqual({ job: j.name, ...(await alone(j.id, args)) });
      // Jobs with more than a page, less than a page, and (for CANCELLED) none, were among them.
      const counts = new Set(large.data.jobs.nodes.map((j: any) => j.executions.totalCount));
      expect(counts.size).toBeGreaterThan(2);
    }
  });

  it("goes on from a nested page's cursor as the job's own list does", async () => {
    const { data } = await reads(JOBS_WITH_RUNS(12, 'first: 2'));
    const busy = data.jobs.nodes.find((j: any) => j.executions.totalCount > 4);
    const next = await g.gql(
      `{ job(id: "${busy.id}") { executions(first: 2, after: "${busy.executions.pageInfo.endCursor}") { nodes { id } } } }`,
    );
    expect(next.errors).toBeUndefined();
    const whole = await alone(busy.id, 'first: 4');
    expect((next.data as any).job.executions.nodes.map((e: any) => e.id)).toEqual(whole.nodes.slice(2, 4).map((e: any) => e.id));
  });

  it("refuses a page size out of range as the job's own list does", async () => {
    const nested = await g.gql(JOBS_WITH_RUNS(2, 'first: 0'));
    const own = await g.gql(`{ executions(first: 0) { totalCount } }`);
    expect(nested.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    expect(nested.errors?.[0]?.extensions?.code).toBe(own.errors?.[0]?.extensions?.code);
  });

  it("costs as many reads for 3 endpoints' jobs as for 1, each as the endpoint's own list", async () => {
    const ENDPOINT_JOBS = (n: number) =>
      `{ endpoints(first: ${n}) { nodes { id jobs(first: 3, status: ACTIVE) { totalCount nodes { id name } pageInfo { hasNextPage } } } } }`;
    const small = await reads(ENDPOINT_JOBS(1));
    const large = await reads(ENDPOINT_JOBS(3));
    // The newest endpoints come first: the three made for these jobs.
    expect(large.data.endpoints.nodes.map((e: any) => e.id).sort()).toEqual([...endpointIds].sort());
    expect(large.count).toBe(small.count);
    for (const e of large.data.endpoints.nodes) {
      const own = await t.service.jobs(t.actor, { endpointId: e.id, status: 'ACTIVE', includeInternal: true }, { first: 3 });
      expect(e.jobs.nodes).toEqual(own.edges.map((x) => ({ id: x.node.id, name: x.node.name })));
      expect(e.jobs.pageInfo.hasNextPage).toBe(own.pageInfo.hasNextPage);
      expect(e.jobs.totalCount).toBe(await own.count!());
      expect(e.jobs.totalCount).toBe(4);
    }
  });
});

describe("a page of rows with their children and dependents, and the nested reads' edges", () => {
  const parents: string[] = [];
  const prerequisites: string[] = [];

  beforeAll(async () => {
    // Four pending executions with 0 to 3 child jobs each, and four jobs with 0 to 3 dependents each.
    await t.service.registerEndpoint(t.actor, { name: 'kin.ep', kind: 'HANDLER', handlerName: 'nobody' });
    const later = () => new Date(Date.now() + 86_400_000);
    for (let i = 0; i < 4; i++) {
      const { job } = await t.service.createJob(t.actor, { endpointName: 'kin.ep', kind: 'DELAYED', name: `kin-${i}`, runAt: later() });
      const execution = (await t.query<{ id: string }>('select id from executions where job_id = $1', [job.id])).rows[0]!.id;
      parents.push(execution);
      prerequisites.push(job.id);
      for (let k = 0; k < i; k++) {
        await t.service.createJob(t.actor, { endpointName: 'kin.ep', kind: 'DELAYED', runAt: later(), parentExecutionId: execution });
        await t.service.createJob(t.actor, { endpointName: 'kin.ep', kind: 'DELAYED', runAt: later(), dependsOn: [job.id] });
      }
    }
  });

  it('costs as many reads for 4 executions with their children as for 1, each page as its own children are', async () => {
    const CHILDREN = (ids: string[]) =>
      `{ executions(first: 10, filter: { ids: ${JSON.stringify(ids)} }) { nodes { id children(first: 2) { nodes { id } pageInfo { hasNextPage } } } } }`;
    const small = await reads(CHILDREN(parents.slice(0, 1)));
    const large = await reads(CHILDREN(parents));
    expect(large.data.executions.nodes).toHaveLength(4);
    expect(large.count).toBe(small.count);
    for (const e of large.data.executions.nodes) {
      const own = (await t.query<{ id: string }>('select id from jobs where parent_execution_id = $1 order by id', [e.id])).rows;
      expect(e.children.nodes).toEqual(own.slice(0, 2).map((r) => ({ id: r.id })));
      expect(e.children.pageInfo.hasNextPage).toBe(own.length > 2);
    }
  });

  it('costs as many reads for 4 jobs with their dependents as for 1, each page as its own dependents are', async () => {
    const DEPENDENTS = (n: number) =>
      `{ jobs(first: ${n}, filter: { search: "kin-" }) { nodes { id dependents(first: 2) { nodes { id } pageInfo { hasNextPage endCursor } } } } }`;
    const small = await reads(DEPENDENTS(1));
    const large = await reads(DEPENDENTS(4));
    expect(large.data.jobs.nodes.map((j: any) => j.id).sort()).toEqual([...prerequisites].sort());
    expect(large.count).toBe(small.count);
    for (const j of large.data.jobs.nodes) {
      const own = (
        await t.query<{ job_id: string }>('select job_id from job_dependencies where prerequisite_id = $1 order by job_id', [j.id])
      ).rows;
      expect(j.dependents.nodes).toEqual(own.slice(0, 2).map((r) => ({ id: r.job_id })));
      expect(j.dependents.pageInfo.hasNextPage).toBe(own.length > 2);
      if (own.length > 2) {
        // The next page goes on from the nested cursor, as the job's own list does.
        const next = await g.gql(
          `{ job(id: "${j.id}") { dependents(first: 2, after: "${j.dependents.pageInfo.endCursor}") { nodes { id } } } }`,
        );
        expect((next.data as any).job.dependents.nodes).toEqual(own.slice(2, 4).map((r) => ({ id: r.job_id })));
      }
    }
  });

  it('reads an id in capitals as the id, answers an id of no row or of another workspace with an empty page, and refuses an empty one', async () => {
    const job = prerequisites[3]!;
    const own = await t.service.executions(t.actor, { jobId: job }, { first: 5 });
    const upper = await t.service.jobExecutions(t.actor, job.toUpperCase(), {}, { first: 5 });
    expect(upper.edges.map((e) => e.node.id)).toEqual(own.edges.map((e) => e.node.id));
    expect(await upper.count!()).toBe(await own.count!());
    // Asked in the same turn as a good id, an id that is no uuid changes nothing for it.
    const [bad, good] = await Promise.all([
      t.service.jobExecutions(t.actor, 'not an id', {}, { first: 5 }),
      t.service.jobExecutions(t.actor, job, {}, { first: 5 }),
    ]);
    expect(bad.edges).toEqual([]);
    expect(good.edges.map((e) => e.node.id)).toEqual(own.edges.map((e) => e.node.id));
    const other = t.otherActor;
    const foreign = await t.service.jobExecutions(other, job, {}, { first: 5 });
    expect(foreign.edges).toEqual([]);
    expect(await foreign.count!()).toBe(0);
    const foreignJobs = await t.service.endpointJobs(other, (await t.service.endpoint(t.actor, { name: 'kin.ep' })).id, {}, { first: 5 });
    expect(foreignJobs.edges).toEqual([]);
    await expect(t.service.jobExecutions(t.actor, '', {}, { first: 5 })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(t.service.endpointJobs(t.actor, '', {}, { first: 5 })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});

describe('a page of batches with their members', () => {
  it('costs as many reads for 4 batches as for 1, each page as its own members are, whole or by outcome', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'members.ep', kind: 'HANDLER', handlerName: 'nobody' });
    for (let i = 0; i < 4; i++)
      await t.service.createBatch(t.actor, {
        name: `members-${i}`,
        jobs: Array.from({ length: i + 1 }, () => ({ endpointName: 'members.ep', kind: 'IMMEDIATE' as const })),
      });
    // Some members ended: counted into their batch as SUCCEEDED.
    await t.query(
      `update executions set status = 'SUCCEEDED', finished_at = now()
       where job_id in (select id from jobs where batch_id in (select id from batches where name like 'members-%') order by id limit 4)`,
    );
    const BATCHES = (n: number, args: string) =>
      `{ batches(first: ${n}) { nodes { id name jobs(${args}) { nodes { id } pageInfo { hasNextPage } } } } }`;
    const own = async (batchId: string, filter: string) =>
      (await t.query<{ id: string }>(`select j.id from jobs j where j.batch_id = $1 and ${filter} order by j.id`, [batchId])).rows.map(
        (r) => ({ id: r.id }),
      );
    const counted = (outcome: string | null) =>
      `exists (select 1 from executions e where e.job_id = j.id and e.trigger = 'SCHEDULE' and e.batch_outcome ${outcome ? `= '${outcome}'` : 'is null'})`;
    for (const [args, filter] of [
      ['first: 2', 'true'],
      ['first: 2, outcome: SUCCEEDED', counted('SUCCEEDED')],
      ['first: 2, ended: false', counted(null)],
    ] as const) {
      const small = await reads(BATCHES(1, args));
      const large = await reads(BATCHES(4, args));
      expect(large.data.batches.nodes.map((b: any) => b.name).sort()).toEqual(['members-0', 'members-1', 'members-2', 'members-3']);
      expect({ args, reads: large.count }).toEqual({ args, reads: small.count });
      // Each way of asking found members in some batch, and not every member in every batch.
      expect(large.data.batches.nodes.some((b: any) => b.jobs.nodes.length > 0)).toBe(true);
      for (const b of large.data.batches.nodes) {
        const rows = await own(b.id, filter);
        expect({ args, batch: b.name, nodes: b.jobs.nodes, more: b.jobs.pageInfo.hasNextPage }).toEqual({
          args,
          batch: b.name,
          nodes: rows.slice(0, 2),
          more: rows.length > 2,
        });
      }
    }
  });
});

describe('first pages read together', () => {
  it('fail only the parents of a group whose statement failed, and find a parent asked in capitals', async () => {
    const A = 'aaaaaaaa-0000-4000-8000-000000000001';
    const B = 'bbbbbbbb-0000-4000-8000-000000000002';
    const statements: string[][] = [];
    const pages = batchedFirstPages(
      async (_ws, ids, args: { fail: boolean }) => {
        statements.push(ids);
        if (args.fail) throw new Error('the statement failed');
        return ids.map((parent) => ({ parent }));
      },
      (row) => row.parent,
      undefined,
      true,
    );
    const [failed, read, upper] = await Promise.allSettled([
      pages('w', A, { fail: true }, 5).rows,
      pages('w', B, { fail: false }, 5).rows,
      pages('w', B.toUpperCase(), { fail: false }, 5).rows,
    ]);
    expect(failed).toMatchObject({ status: 'rejected', reason: { message: 'the statement failed' } });
    expect(read).toEqual({ status: 'fulfilled', value: [{ parent: B }] });
    expect(upper).toEqual({ status: 'fulfilled', value: [{ parent: B }] });
    // One statement per group of the same arguments, asked in the same turn.
    expect(statements).toEqual([[A], [B]]);
  });
});

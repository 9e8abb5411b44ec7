/**
 * A page's reads do not grow with its size: the links and permissions each row asks for (an
 * execution's job and viewerCan, a job's lastExecution, scheduledExecution, completesBatch, state
 * and viewerCan) are read together, one query per step for the whole page
 * (src/service/kernel/batched-reads.ts), and answer what a read of their own would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

const EXECUTIONS = (n: number) => `{ executions(first: ${n}) { nodes { id job { id name } viewerCan { retry cancel } } } }`;
const JOBS = (n: number) =>
  `{ jobs(first: ${n}) { nodes { id name state lastExecution { id createdAt } scheduledExecution { id trigger } completesBatch { id } viewerCan { trigger cancel } } } }`;

describe('a page of rows with their links', () => {
  it('costs as many reads for 30 executions as for 3, with each row its own job and permissions', async () => {
    for (const actor of [t.actor, { ...t.actor, role: 'OPERATOR' as const }, { ...t.actor, role: 'VIEWER' as const }]) {
      const small = await reads(EXECUTIONS(3), actor);
      const large = await reads(EXECUTIONS(30), actor);
      expect(large.data.executions.nodes).toHaveLength(30);
      expect({ role: actor.role, reads: large.count }).toEqual({ role: actor.role, reads: small.count });
      for (const e of large.data.executions.nodes) {
        const row = (await t.query('select job_id from executions where id = $1', [e.id])).rows[0];
        expect(e.job.id).toBe(row.job_id);
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
      const own = await t.service.jobPermissions(t.actor, j.id);
      expect(j.viewerCan).toEqual({ trigger: own.trigger, cancel: own.cancel });
    }
    const triggered = large.data.jobs.nodes.find((j: any) => j.name === 'triggered');
    // Triggered twice: its newest execution is the last trigger, its scheduled one the one it was created with.
    expect(triggered.scheduledExecution.id).not.toBe(triggered.lastExecution.id);
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

/**
 * What a list screen asks of jobs and executions: filters, search, order, counts, paged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
const jobIds: Record<string, string> = {};
let middle: string;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  await t.service.registerEndpoint(t.actor, { name: 'lists.a', kind: 'HANDLER', handlerName: 'a' });
  await t.service.registerEndpoint(t.actor, { name: 'lists.b', kind: 'HANDLER', handlerName: 'b' });
  const make = async (name: string, endpointName: string, idempotencyKey?: string) => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName,
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
      name,
      idempotencyKey,
    });
    jobIds[name] = job.id;
  };
  await make('Nightly invoices', 'lists.a', 'inv-2026-12');
  await make('nightly_reports', 'lists.a');
  await make('Weekly digest', 'lists.b', 'digest-49');
  middle = (await t.query('select now() as now')).rows[0].now.toISOString();
  await make('nightly%cleanup', 'lists.b', 'inv-old');
  await t.service.cancelExecution(
    t.actor,
    (await t.query('select id from executions where job_id = $1', [jobIds['Weekly digest']])).rows[0].id,
  );
  await t.service.triggerJob(t.actor, { id: jobIds['nightly_reports']!, force: true });
});
afterAll(() => t.close());

const names = async (filter: string, extra = '') => {
  const res = await g.gql(`{ jobs(first: 50, filter: ${filter}) { nodes { name } totalCount totalCountCapped ${extra} } }`);
  expect(res.errors).toBeUndefined();
  return res.data.jobs as { nodes: { name: string }[]; totalCount: number; totalCountCapped: boolean };
};

describe('job lists', () => {
  it('search by a name prefix in any case, or an idempotency key prefix, taking % and _ literally', async () => {
    expect((await names('{ search: "NIGHTLY" }')).nodes.map((n) => n.name).sort()).toEqual([
      'Nightly invoices',
      'nightly%cleanup',
      'nightly_reports',
    ]);
    expect((await names('{ search: "inv-" }')).nodes.map((n) => n.name).sort()).toEqual(['Nightly invoices', 'nightly%cleanup']);
    expect((await names('{ search: "nightly%" }')).nodes.map((n) => n.name)).toEqual(['nightly%cleanup']);
    expect((await names('{ search: "nightly_" }')).nodes.map((n) => n.name)).toEqual(['nightly_reports']);
    expect((await names('{ search: "eekly" }')).nodes).toEqual([]); // a prefix, not a substring
  });

  it('count the whole filtered list, not the page, and read oldest first when asked', async () => {
    const res = await g.gql(
      '{ jobs(first: 1, filter: { search: "nightly", order: OLDEST_FIRST }) { nodes { name } totalCount totalCountCapped pageInfo { endCursor } } }',
    );
    expect(res.data.jobs).toMatchObject({ nodes: [{ name: 'Nightly invoices' }], totalCount: 3, totalCountCapped: false });
    const next = await g.gql(
      `{ jobs(first: 5, after: "${res.data.jobs.pageInfo.endCursor}", filter: { search: "nightly", order: OLDEST_FIRST }) { nodes { name } } }`,
    );
    expect(next.data.jobs.nodes.map((n: { name: string }) => n.name)).toEqual(['nightly_reports', 'nightly%cleanup']);
  });

  it('refuse an empty search with VALIDATION_FAILED naming the field', async () => {
    const res = await g.gql('{ jobs(filter: { search: "" }) { nodes { id } } }');
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(JSON.stringify(res.errors![0]!.extensions!.issues)).toContain('search');
  });
});

const executions = async (filter: string) => {
  const res = await g.gql(`{ executions(first: 50, filter: ${filter}) { nodes { job { name } status trigger } totalCount } }`);
  expect(res.errors).toBeUndefined();
  return res.data.executions as { nodes: { job: { name: string }; status: string; trigger: string }[]; totalCount: number };
};

describe('execution lists', () => {
  it('filter by endpoint, several statuses, trigger and creation time, with a count of what matched', async () => {
    const b = (await g.gql('{ endpoint(name: "lists.b") { id } }')).data.endpoint.id;
    const onB = await executions(`{ endpointId: "${b}" }`);
    expect(onB.nodes.map((n) => n.job.name).sort()).toEqual(['Weekly digest', 'nightly%cleanup']);
    expect(onB.totalCount).toBe(2);
    expect((await executions('{ statuses: [CANCELLED] }')).nodes.map((n) => n.job.name)).toEqual(['Weekly digest']);
    expect((await executions('{ statuses: [PENDING, CANCELLED] }')).totalCount).toBe(5);
    expect((await executions('{ trigger: MANUAL }')).nodes).toEqual([
      { job: { name: 'nightly_reports' }, status: 'PENDING', trigger: 'MANUAL' },
    ]);
    const later = await executions(`{ createdAfter: "${middle}" }`);
    expect(later.nodes.map((n) => n.job.name).sort()).toEqual(['nightly%cleanup', 'nightly_reports']);
    expect((await executions(`{ createdBefore: "${middle}", order: OLDEST_FIRST }`)).nodes.map((n) => n.job.name)).toEqual([
      'Nightly invoices',
      'nightly_reports',
      'Weekly digest',
    ]);
  });

  it('refuse a time range that ends before it starts', async () => {
    const res = await g.gql(
      `{ executions(filter: { createdAfter: "${middle}", createdBefore: "2000-01-01T00:00:00Z" }) { nodes { id } } }`,
    );
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('give an empty list, not an error or a leak, for an endpoint id of no workspace', async () => {
    expect(await executions('{ endpointId: "00000000-0000-0000-0000-000000000000" }')).toEqual({ nodes: [], totalCount: 0 });
  });

  it("keep jobgate's own (INTERNAL) executions apart with endpointType, listing both when it is not given", async () => {
    await t.service.registerEndpoint(
      t.systemActor,
      { name: 'jobgate.lists-internal', kind: 'HANDLER', handlerName: 'i' },
      { type: 'INTERNAL' },
    );
    await t.service.createJob(t.systemActor, {
      endpointName: 'jobgate.lists-internal',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 86_400_000),
      name: 'internal-delivery',
    });
    const all = await executions('{}');
    const user = await executions('{ endpointType: USER }');
    const internal = await executions('{ endpointType: INTERNAL }');
    expect(internal.nodes.map((n) => n.job.name)).toEqual(['internal-delivery']);
    expect(user.nodes.map((n) => n.job.name)).not.toContain('internal-delivery');
    expect(user.totalCount + internal.totalCount).toBe(all.totalCount);
    expect(all.nodes.map((n) => n.job.name)).toContain('internal-delivery');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let endpointId: string;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'page.me', kind: 'HANDLER', handlerName: 'p' })).id;
  for (let i = 0; i < 7; i++) await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', name: `job-${i}` });
});
afterAll(() => t.close());

const JOBS = `query ($first: Int, $after: String) {
  jobs(first: $first, after: $after) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } }
}`;

describe('connections', () => {
  it('pages through jobs newest first with keyset cursors, each item once', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const res: any = await g.gql(JOBS, { first: 3, after });
      expect(res.errors).toBeUndefined();
      seen.push(...res.data.jobs.edges.map((e: any) => e.node.name));
      pages++;
      if (!res.data.jobs.pageInfo.hasNextPage) break;
      after = res.data.jobs.pageInfo.endCursor;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(['job-6', 'job-5', 'job-4', 'job-3', 'job-2', 'job-1', 'job-0']);
  });

  it('is not disturbed by rows inserted between pages', async () => {
    const first: any = await g.gql(JOBS, { first: 2 });
    await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', name: 'job-new' });
    const second: any = await g.gql(JOBS, { first: 2, after: first.data.jobs.pageInfo.endCursor });
    const names = second.data.jobs.edges.map((e: any) => e.node.name);
    expect(names).not.toContain('job-new');
    expect(names).not.toContain(first.data.jobs.edges[1].node.name);
  });

  it('pages through runs newest first, filtered by handler and status', async () => {
    for (const name of ['scan.a', 'scan.b', 'scan.c', 'other.d']) await t.service.triggerRun(t.actor, { name, force: true });
    await t.service.triggerRun(t.otherActor, { force: true, name: 'scan.z' });
    const RUNS = `query ($first: Int, $after: String, $name: String, $status: RunStatus) {
      runConnection(first: $first, after: $after, name: $name, status: $status) { nodes { name status } pageInfo { hasNextPage endCursor } }
    }`;
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const res: any = await g.gql(RUNS, { first: 3, after });
      expect(res.errors).toBeUndefined();
      seen.push(...res.data.runConnection.nodes.map((n: any) => n.name));
      if (!res.data.runConnection.pageInfo.hasNextPage) break;
      after = res.data.runConnection.pageInfo.endCursor;
    }
    expect(seen).toEqual(['other.d', 'scan.c', 'scan.b', 'scan.a']);
    const byName: any = await g.gql(RUNS, { name: 'scan.b' });
    expect(byName.data.runConnection.nodes).toEqual([{ name: 'scan.b', status: 'RUNNING' }]);
    const none: any = await g.gql(RUNS, { status: 'COMPLETED' });
    expect(none.data.runConnection).toEqual({ nodes: [], pageInfo: { hasNextPage: false, endCursor: null } });
    // Counted, as every list is (the console's overview tiles read these; they read 0 before).
    const counts: any = await g.gql(`{
      all: runConnection(first: 1) { totalCount totalCountCapped }
      running: runConnection(status: RUNNING, first: 1) { totalCount }
      scanB: runConnection(name: "scan.b", first: 1) { totalCount }
      completed: runConnection(status: COMPLETED, first: 1) { totalCount }
    }`);
    expect(counts.data).toEqual({
      all: { totalCount: 4, totalCountCapped: false },
      running: { totalCount: 4 },
      scanB: { totalCount: 1 },
      completed: { totalCount: 0 },
    });
    // The deprecated list still answers, newest first.
    const list: any = await g.gql(`{ runs { name } }`);
    expect(list.data.runs.map((r: any) => r.name)).toEqual(['other.d', 'scan.c', 'scan.b', 'scan.a']);
  });

  it('refuses a cursor it did not issue and a page size out of range', async () => {
    const bad = await g.gql(JOBS, { after: 'bm90LWEtY3Vyc29y' });
    expect(bad.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['after'] }] });
    const big = await g.gql(JOBS, { first: 1000 });
    expect(big.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['first'] }] });
  });

  it('refuses a forged cursor of the right shape whose id is not a UUID', async () => {
    // 36 characters of hex digits and dashes pass a shape check, but no row has such an id.
    for (const forged of ['-'.repeat(36), 'a'.repeat(36)]) {
      const after = Buffer.from(`v1:${forged}`).toString('base64url');
      const jobs = await g.gql(JOBS, { after });
      expect(jobs.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['after'] }] });
      const executions = await g.gql(`query ($after: String) { executions(after: $after) { nodes { id } } }`, { after });
      expect(executions.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['after'] }] });
    }
  });

  it('refuses a page after a cursor whose item is gone (CURSOR_EXPIRED), rather than an empty page that reads as the end', async () => {
    const gone = (await t.service.registerEndpoint(t.actor, { name: 'page.gone', kind: 'HANDLER', handlerName: 'p' })).id;
    for (let i = 0; i < 4; i++) await t.service.createJob(t.actor, { endpointId: gone, kind: 'IMMEDIATE', name: `gone-${i}` });
    const EXECUTIONS = `query ($after: String, $endpointId: ID) {
      executions(first: 2, after: $after, filter: { endpointId: $endpointId }) { nodes { id } pageInfo { hasNextPage endCursor } }
    }`;
    const first: any = await g.gql(EXECUTIONS, { endpointId: gone });
    const second: any = await g.gql(EXECUTIONS, { endpointId: gone, after: first.data.executions.pageInfo.endCursor });
    expect(second.data.executions.nodes).toHaveLength(2);
    // The last page: its cursor's row is there, and nothing is after it. The end, not an error.
    const end: any = await g.gql(EXECUTIONS, { endpointId: gone, after: second.data.executions.pageInfo.endCursor });
    expect(end.errors).toBeUndefined();
    expect(end.data.executions.nodes).toEqual([]);

    // Retention prunes the row the first page ended at; two older ones remain.
    const pruned = first.data.executions.nodes[1].id;
    await t.database.pool.query('delete from executions where id = $1', [pruned]);
    const after: any = await g.gql(EXECUTIONS, { endpointId: gone, after: first.data.executions.pageInfo.endCursor });
    expect(after.data).toBeNull();
    expect(after.errors![0]!.extensions).toMatchObject({ code: 'CURSOR_EXPIRED', after: first.data.executions.pageInfo.endCursor });

    // A well-formed cursor naming no row of the list is refused the same way, on every keyset list.
    const nowhere = Buffer.from(`v1:${crypto.randomUUID()}`).toString('base64url');
    for (const list of ['jobs', 'executions', 'runConnection']) {
      const res: any = await g.gql(`query ($after: String) { ${list}(first: 2, after: $after) { nodes { id } } }`, { after: nowhere });
      expect(res.errors![0]!.extensions).toMatchObject({ code: 'CURSOR_EXPIRED' });
    }
  });

  it('lists executions by job and status, with attempts and job resolvable', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', name: 'with-exec' });
    const res = await g.gql(
      `query ($jobId: ID) { executions(jobId: $jobId, status: PENDING) { nodes { status attemptCount maxAttempts nextAttemptAt attempts { id } job { name } } } }`,
      { jobId: job.id },
    );
    expect(res.errors).toBeUndefined();
    expect(res.data.executions.nodes).toEqual([
      { status: 'PENDING', attemptCount: 0, maxAttempts: 5, nextAttemptAt: expect.any(String), attempts: [], job: { name: 'with-exec' } },
    ]);
  });
});

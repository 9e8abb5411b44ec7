/**
 * What a list or detail screen reads in one query: a job's state, its executions and newest
 * execution, an endpoint's jobs, a run trigger's typed outcome. Through GraphQL, with a real worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let h: EngineHarness;
let release: () => void = () => {};
const held = new Promise<void>((r) => (release = r));
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  h = engineHarness(t);
  h.handle('ok', () => {});
  h.handle('bad', () => {
    throw new UnrecoverableError('no');
  });
  h.handle('held', () => held);
  for (const name of ['ok', 'bad', 'held']) {
    await t.service.registerEndpoint(t.actor, { name: `links.${name}`, kind: 'HANDLER', handlerName: name, maxAttempts: 1 });
  }
  await h.worker();
});
afterAll(async () => {
  release();
  await h.stopAll();
  await t.close();
});

const create = async (endpoint: string, kind = 'IMMEDIATE', extra = '') => {
  const res = await g.gql(
    `mutation { createJob(input: { endpointName: "${endpoint}", kind: ${kind} ${extra} }) { job { id state lastExecution { id status } } } }`,
  );
  expect(res.errors).toBeUndefined();
  return res.data.createJob.job as { id: string; state: string; lastExecution: { id: string; status: string } | null };
};
const stateOf = async (id: string) => (await g.gql(`{ job(id: "${id}") { state status } }`)).data.job;

describe('links and states for frontends', () => {
  it('answers createJob with the first execution, so a page need not query again', async () => {
    const job = await create('links.held');
    // A worker may have claimed it before the answer was written.
    expect(['PENDING', 'RUNNING']).toContain(job.lastExecution!.status);
    const ex = (await t.query('select id from executions where job_id = $1', [job.id])).rows;
    expect(ex).toEqual([{ id: job.lastExecution!.id }]);
    release();
    await settled(t, job.id);
  });

  it('reads a one-off job as COMPLETED or FAILED once its execution ended, while its status stays ACTIVE', async () => {
    const good = await create('links.ok');
    const bad = await create('links.bad');
    await settled(t, good.id);
    await settled(t, bad.id);
    expect(await stateOf(good.id)).toEqual({ state: 'COMPLETED', status: 'ACTIVE' });
    expect(await stateOf(bad.id)).toEqual({ state: 'FAILED', status: 'ACTIVE' });
    // A re-drive makes it ACTIVE again until it ends.
    const [{ id }] = (await t.query('select id from executions where job_id = $1', [bad.id])).rows;
    const retried = await g.gql(`mutation { retryExecution(id: "${id}") { id } }`);
    expect(retried.errors).toBeUndefined();
    await eventually(
      async () => (await t.query('select attempt_count from executions where id = $1', [id])).rows[0].attempt_count === 2,
      10_000,
      'the re-drive to run',
    );
    await eventually(async () => (await stateOf(bad.id)).state === 'FAILED', 10_000, 'the re-driven job to fail again');
  });

  it('reads a paused or retired job by its status, and a cron job as ACTIVE whatever its executions did', async () => {
    const cron = await create('links.ok', 'CRON', 'cron: { expression: "0 0 1 1 *" }');
    expect(cron.state).toBe('ACTIVE');
    expect(cron.lastExecution).toBeNull();
    await g.gql(`mutation { pauseJob(id: "${cron.id}") { id } }`);
    expect((await stateOf(cron.id)).state).toBe('PAUSED');
    await g.gql(`mutation { cancelJob(id: "${cron.id}") { job { id } } }`);
    expect((await stateOf(cron.id)).state).toBe('RETIRED');
  });

  it("lists a job's executions and an endpoint's jobs, filtered and paged", async () => {
    const job = await create('links.ok');
    await settled(t, job.id);
    const triggered = await g.gql(`mutation { triggerJob(input: { id: "${job.id}", force: true }) { execution { id } } }`);
    expect(triggered.errors).toBeUndefined();
    const read = () =>
      g.gql(
        `{ job(id: "${job.id}") { executions(first: 5, status: SUCCEEDED) { nodes { status trigger } } lastExecution { id status } } }`,
      );
    await eventually(async () => (await read()).data.job.executions.nodes.length === 2, 10_000, 'both executions to succeed');
    const res = await read();
    expect(res.data.job.executions.nodes.map((n: { trigger: string }) => n.trigger)).toEqual(['MANUAL', 'SCHEDULE']);
    expect(res.data.job.lastExecution).toEqual({ id: triggered.data.triggerJob.execution.id, status: 'SUCCEEDED' });
    const page = await g.gql(
      `{ endpoint(name: "links.ok") { jobs(first: 1, kind: IMMEDIATE) { nodes { id } pageInfo { hasNextPage endCursor } } } }`,
    );
    expect(page.errors).toBeUndefined();
    const first = page.data.endpoint.jobs;
    expect(first.nodes[0].id).toBe(job.id);
    expect(first.pageInfo.hasNextPage).toBe(true);
    const rest = await g.gql(
      `{ endpoint(name: "links.ok") { jobs(first: 50, kind: IMMEDIATE, after: "${first.pageInfo.endCursor}") { nodes { id } } } }`,
    );
    const all = (
      await t.query(
        `select count(*)::int as n from jobs j join endpoints e on e.id = j.endpoint_id where e.name = 'links.ok' and j.kind = 'IMMEDIATE'`,
      )
    ).rows[0].n;
    expect(first.nodes.length + rest.data.endpoint.jobs.nodes.length).toBe(all);
  });

  it('types what triggerRun did as the RunTriggerOutcome enum, keeping the deprecated string', async () => {
    const res = await g.gql('mutation { triggerRun(input: { name: "links.scan", force: true }) { result outcome } }');
    expect(res.errors).toBeUndefined();
    expect(res.data.triggerRun).toEqual({ result: 'STARTED', outcome: 'STARTED' });
    const type = await g.gql(
      '{ __type(name: "TriggerRunPayload") { fields(includeDeprecated: true) { name type { kind ofType { name } } isDeprecated } } }',
    );
    const fields = type.data.__type.fields as { name: string; type: { ofType: { name: string } }; isDeprecated: boolean }[];
    expect(fields.find((f) => f.name === 'result')).toMatchObject({ type: { ofType: { name: 'RunTriggerOutcome' } }, isDeprecated: false });
    expect(fields.find((f) => f.name === 'outcome')!.isDeprecated).toBe(true);
  });

  it('fetches any object of the workspace by id alone through node(id:), as a Relay or normalized cache refetches', async () => {
    const job = await create('links.ok');
    await settled(t, job.id);
    const endpoint = (await g.gql('{ endpoint(name: "links.ok") { id } }')).data.endpoint.id;
    const workspace = (await g.gql('{ workspace { id } }')).data.workspace.id;
    const spec = await t.service.createPayloadSpec(t.actor, { name: 'links.spec', jsonSchema: true });
    const config = await t.service.setConfig(t.actor, { name: 'links.config', entries: [] });
    const run = (await g.gql('mutation { triggerRun(input: { name: "links.node", force: true }) { run { id } } }')).data.triggerRun.run.id;
    const read = async (id: string) => (await g.gql(`{ node(id: "${id}") { id __typename ... on Job { state } } }`)).data.node;
    expect(await read(job.id)).toEqual({ id: job.id, __typename: 'Job', state: 'COMPLETED' });
    expect(await read(job.lastExecution!.id)).toEqual({ id: job.lastExecution!.id, __typename: 'Execution' });
    expect(await read(endpoint)).toEqual({ id: endpoint, __typename: 'Endpoint' });
    expect(await read(workspace)).toEqual({ id: workspace, __typename: 'Workspace' });
    expect(await read(spec.id)).toEqual({ id: spec.id, __typename: 'PayloadSpec' });
    expect(await read(config.id)).toEqual({ id: config.id, __typename: 'Config' });
    expect(await read(run)).toEqual({ id: run, __typename: 'Run' });
    expect(await read('00000000-0000-0000-0000-000000000000')).toBeNull();
    expect(await read('not-a-uuid')).toBeNull();
  });
});

/**
 * `viewerCan` on endpoints, jobs, executions, runs and batches answers what the mutations then do: for each key and
 * each action, the permission shown and the mutation's acceptance or refusal agree.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let operator: Actor;
let viewer: Actor;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  operator = await t.service.authenticate((await t.service.createApiKey(t.actor, { name: 'perm operator', role: 'OPERATOR' })).key);
  viewer = await t.service.authenticate((await t.service.createApiKey(t.actor, { name: 'perm viewer', role: 'VIEWER' })).key);
  await t.service.registerEndpoint(t.actor, { name: 'perm.work', kind: 'HANDLER', handlerName: 'perm' });
  await t.service.registerEndpoint(
    t.systemActor,
    { name: 'jobgate.perm-internal', kind: 'HANDLER', handlerName: 'i' },
    { type: 'INTERNAL' },
  );
});
afterAll(async () => {
  await g.close();
  await t.close();
});

const later = () => new Date(Date.now() + 86_400_000);
const JOB = `query ($id: ID!) { job(id: $id) { viewerCan { trigger pause resume update cancel }
  executions(first: 1) { nodes { id viewerCan { retry cancel } } } } }`;

async function can(id: string, actor: Actor) {
  const res = await g.gql(JOB, { id }, actor);
  expect(res.errors).toBeUndefined();
  return { job: res.data.job.viewerCan, execution: res.data.job.executions.nodes[0].viewerCan };
}

async function refusal(query: string, variables: Record<string, unknown>, actor: Actor): Promise<string | undefined> {
  const res = await g.gql(query, variables, actor);
  return res.errors?.[0]?.extensions?.code as string | undefined;
}

describe('viewerCan', () => {
  it("shows an OPERATOR the actions on another key's job that the mutations accept, and hides those they refuse", async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'perm.work', kind: 'DELAYED', runAt: later(), name: 'admins' });
    const shown = await can(job.id, operator);
    expect(shown).toEqual({
      job: { trigger: true, pause: false, resume: false, update: false, cancel: false },
      execution: { retry: true, cancel: false },
    });
    expect(await refusal('mutation ($id: ID!) { pauseJob(id: $id) { id } }', { id: job.id }, operator)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }', { id: job.id }, operator)).toBe('FORBIDDEN');
    const executionId = (await g.gql(JOB, { id: job.id })).data.job.executions.nodes[0].id;
    expect(await refusal('mutation ($id: ID!) { cancelExecution(id: $id) { id } }', { id: executionId }, operator)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { triggerJob(input: { id: $id, force: true }) { created } }', { id: job.id }, operator)).toBe(
      undefined,
    );
  });

  it('shows an OPERATOR every action on its own job, the ADMIN every action, and a VIEWER none', async () => {
    const { job } = await t.service.createJob(operator, { endpointName: 'perm.work', kind: 'DELAYED', runAt: later(), name: 'operators' });
    const all = { job: { trigger: true, pause: true, resume: true, update: true, cancel: true }, execution: { retry: true, cancel: true } };
    expect(await can(job.id, operator)).toEqual(all);
    expect(await can(job.id, t.actor)).toEqual(all);
    const none = {
      job: { trigger: false, pause: false, resume: false, update: false, cancel: false },
      execution: { retry: false, cancel: false },
    };
    expect(await can(job.id, viewer)).toEqual(none);
    expect(await refusal('mutation ($id: ID!) { pauseJob(id: $id) { id } }', { id: job.id }, viewer)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { pauseJob(id: $id) { id } }', { id: job.id }, operator)).toBe(undefined);
    // Retired: nothing more, for anyone.
    expect(await refusal('mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }', { id: job.id }, operator)).toBe(undefined);
    const retired = await can(job.id, t.actor);
    expect(retired.job).toEqual({ trigger: false, pause: false, resume: false, update: false, cancel: false });
    expect(retired.execution.retry).toBe(false);
    expect(await refusal('mutation ($id: ID!) { triggerJob(input: { id: $id, force: true }) { created } }', { id: job.id }, t.actor)).toBe(
      'RETIRED',
    );
  });

  it('shows no action on an INTERNAL job, even to the ADMIN', async () => {
    const { job } = await t.service.createJob(t.systemActor, { endpointName: 'jobgate.perm-internal', kind: 'DELAYED', runAt: later() });
    const shown = await can(job.id, t.actor);
    expect(shown.job).toEqual({ trigger: false, pause: false, resume: false, update: false, cancel: false });
    expect(shown.execution).toEqual({ retry: false, cancel: false });
    expect(await refusal('mutation ($id: ID!) { triggerJob(input: { id: $id, force: true }) { created } }', { id: job.id }, t.actor)).toBe(
      'FORBIDDEN',
    );
  });

  it("shows an OPERATOR no change on another key's endpoint, every change on its own, none once archived, and a VIEWER none", async () => {
    const theirs = await t.service.registerEndpoint(t.actor, { name: 'perm.theirs', kind: 'HANDLER', handlerName: 'perm' });
    const mine = await t.service.registerEndpoint(operator, { name: 'perm.mine', kind: 'HANDLER', handlerName: 'perm' });
    const q = 'query ($id: ID!) { endpoint(id: $id) { viewerCan { update archive pause resume } } }';
    const shown = async (id: string, actor: Actor) => (await g.gql(q, { id }, actor)).data.endpoint.viewerCan;
    const none = { update: false, archive: false, pause: false, resume: false };
    const all = { update: true, archive: true, pause: true, resume: true };
    expect(await shown(theirs.id, operator)).toEqual(none);
    expect(await shown(mine.id, operator)).toEqual(all);
    expect(await shown(theirs.id, t.actor)).toEqual(all);
    expect(await shown(mine.id, viewer)).toEqual(none);
    const internal = (await t.query(`select id from endpoints where name = 'jobgate.perm-internal'`)).rows[0].id;
    expect(await shown(internal, t.actor)).toEqual(none);
    // What the mutations then do.
    const pause = 'mutation ($id: ID!) { pauseEndpoint(id: $id) { id } }';
    expect(await refusal(pause, { id: theirs.id }, operator)).toBe('FORBIDDEN');
    expect(await refusal(pause, { id: mine.id }, operator)).toBe(undefined);
    expect(await refusal(pause, { id: internal }, t.actor)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { archiveEndpoint(id: $id) { id } }', { id: mine.id }, operator)).toBe(undefined);
    expect(await shown(mine.id, operator)).toEqual(none);
    expect(await refusal('mutation ($id: ID!) { resumeEndpoint(id: $id) { id } }', { id: mine.id }, operator)).toBe('ARCHIVED');
  });

  it('shows an OPERATOR cancel only on runs its key triggered', async () => {
    const mine = await t.service.triggerRun(operator, { name: 'perm.scan-mine', force: true });
    const theirs = await t.service.triggerRun(t.actor, { name: 'perm.scan-theirs', force: true });
    const q = 'query ($id: ID!) { run(id: $id) { viewerCan { cancel resume } } }';
    expect((await g.gql(q, { id: mine.run.id }, operator)).data.run.viewerCan).toEqual({ cancel: true, resume: true });
    expect((await g.gql(q, { id: theirs.run.id }, operator)).data.run.viewerCan).toEqual({ cancel: false, resume: true });
    expect((await g.gql(q, { id: theirs.run.id }, viewer)).data.run.viewerCan).toEqual({ cancel: false, resume: false });
    expect(await refusal('mutation ($id: ID!) { cancelRun(id: $id) { id } }', { id: theirs.run.id }, operator)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { cancelRun(id: $id) { id } }', { id: mine.run.id }, operator)).toBe(undefined);
  });

  it('shows an OPERATOR closing, cancelling and joining only the batches its key created', async () => {
    const mine = (await t.service.createBatch(operator, { open: true })).batch.id;
    const theirs = (await t.service.createBatch(t.actor, { open: true })).batch.id;
    const q = 'query ($id: ID!) { batch(id: $id) { viewerCan { close cancel addMember } } }';
    const shown = async (id: string, actor: Actor) => (await g.gql(q, { id }, actor)).data.batch.viewerCan;
    const all = { close: true, cancel: true, addMember: true };
    const none = { close: false, cancel: false, addMember: false };
    expect(await shown(mine, operator)).toEqual(all);
    expect(await shown(theirs, operator)).toEqual(none);
    expect(await shown(theirs, t.actor)).toEqual(all);
    expect(await shown(mine, viewer)).toEqual(none);
    const join = 'mutation ($b: ID) { createJob(input: { batchId: $b, endpointName: "perm.work", kind: IMMEDIATE }) { created } }';
    expect(await refusal(join, { b: theirs }, operator)).toBe('FORBIDDEN');
    expect(await refusal(join, { b: mine }, operator)).toBe(undefined);
    expect(await refusal('mutation ($id: ID!) { closeBatch(id: $id) { id } }', { id: theirs }, operator)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { cancelBatch(id: $id) { cancelledJobs } }', { id: theirs }, operator)).toBe('FORBIDDEN');
    expect(await refusal('mutation ($id: ID!) { cancelBatch(id: $id) { cancelledJobs } }', { id: mine }, operator)).toBe(undefined);
  });
});

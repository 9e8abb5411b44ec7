/**
 * createJobs over GraphQL and the library: many jobs in one transaction, each by createJob's
 * rules, all or nothing. The rows match createJob's (job, first execution, audit row); an item's
 * refusal names it and leaves nothing behind; idempotency keys work within one call and across
 * calls; 1,000 jobs go in one call and run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let h: EngineHarness;
let ran = 0;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  h = engineHarness(t);
  h.handle('counted', () => void ran++);
  await t.service.registerEndpoint(t.actor, { name: 'many.plain', kind: 'HANDLER', handlerName: 'nobody' });
  await t.service.registerEndpoint(t.actor, { name: 'many.run', kind: 'HANDLER', handlerName: 'counted' });
  const spec = await t.service.createPayloadSpec(t.actor, { name: 'many.order', jsonSchema: { type: 'object', required: ['orderId'] } });
  await t.service.registerEndpoint(t.actor, { name: 'many.specced', kind: 'HANDLER', handlerName: 'nobody', payloadSpecId: spec.id });
});
afterAll(async () => {
  await h.stopAll();
  await t.close();
});

const count = async (sql: string, values: unknown[] = []) => Number((await t.query(sql, values)).rows[0].n);
const jobsOn = (endpoint: string) =>
  count(`select count(*) as n from jobs j join endpoints e on e.id = j.endpoint_id where e.name = $1`, [endpoint]);

const CREATE = `mutation ($jobs: [CreateJobInput!]!) {
  createJobs(input: { jobs: $jobs }) { results { created eventCursor job { id kind name input maxAttempts } } }
}`;

describe('createJobs', () => {
  it('creates every kind of job in one call, in the order asked, each with its execution and audit row as createJob writes them', async () => {
    const before = await count(`select count(*) as n from audit_log where action = 'job.create' and result_code = 'OK'`);
    const jobs = [
      { endpointName: 'many.plain', kind: 'IMMEDIATE', name: 'first', input: { n: 1 } },
      { endpointName: 'many.plain', kind: 'DELAYED', name: 'second', runAt: '2031-01-01T00:00:00Z', maxAttempts: 2 },
      { endpointName: 'many.specced', kind: 'IMMEDIATE', name: 'third', input: { orderId: 7 } },
      { endpointName: 'many.plain', kind: 'CRON', name: 'fourth', cron: { expression: '0 3 * * *' } },
      { endpointName: 'many.plain', kind: 'IMMEDIATE', name: 'fifth', idempotencyKey: 'k-5', lockKey: 'l-5' },
    ];
    const res = await g.gql(CREATE, { jobs });
    expect(res.errors).toBeUndefined();
    const results = res.data.createJobs.results;
    expect(results.map((r: any) => [r.job.name, r.job.kind, r.created])).toEqual([
      ['first', 'IMMEDIATE', true],
      ['second', 'DELAYED', true],
      ['third', 'IMMEDIATE', true],
      ['fourth', 'CRON', true],
      ['fifth', 'IMMEDIATE', true],
    ]);
    expect(results[0].job.input).toEqual({ n: 1 });
    expect(results[1].job.maxAttempts).toBe(2);
    expect(results.every((r: any) => typeof r.eventCursor === 'string')).toBe(true);
    const ids = results.map((r: any) => r.job.id);
    // One first execution per job but the cron job; one OK audit row per job.
    const executions = await t.query(`select job_id, status from executions where job_id = any($1::uuid[])`, [ids]);
    expect(executions.rows.map((r) => r.job_id).sort()).toEqual([ids[0], ids[1], ids[2], ids[4]].sort());
    expect(executions.rows.every((r) => r.status === 'PENDING')).toBe(true);
    expect(await count(`select count(*) as n from audit_log where action = 'job.create' and result_code = 'OK'`)).toBe(before + 5);
    expect(
      await count(
        `select count(*) as n from audit_log where action = 'job.create' and target_type = 'Job' and target_id = any($1::text[])`,
        [ids],
      ),
    ).toBe(5);
  });

  it("refuses the whole call for one item's refusal, naming the item, and writes nothing but the refusal's audit row", async () => {
    const jobsBefore = await count(`select count(*) as n from jobs`);
    const executionsBefore = await count(`select count(*) as n from executions`);
    const auditBefore = await count(`select count(*) as n from audit_log`);
    // A payload that fails the endpoint's spec, third of four.
    const spec = await g.gql(CREATE, {
      jobs: [
        { endpointName: 'many.plain', kind: 'IMMEDIATE' },
        { endpointName: 'many.plain', kind: 'IMMEDIATE', idempotencyKey: 'never' },
        { endpointName: 'many.specced', kind: 'IMMEDIATE', input: { nope: 1 } },
        { endpointName: 'many.plain', kind: 'IMMEDIATE' },
      ],
    });
    expect(spec.data).toBeNull();
    expect(spec.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', index: 2 });
    expect(JSON.stringify(spec.errors?.[0]?.extensions?.issues)).toContain('"jobs",2');
    // Malformed input (DELAYED without runAt) is refused before anything is written.
    const malformed = await g.gql(CREATE, {
      jobs: [
        { endpointName: 'many.plain', kind: 'IMMEDIATE' },
        { endpointName: 'many.plain', kind: 'DELAYED' },
      ],
    });
    expect(malformed.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', index: 1 });
    // An unknown endpoint, a lock key taken by an earlier item of the same call.
    const missing = await g.gql(CREATE, {
      jobs: [
        { endpointName: 'many.plain', kind: 'IMMEDIATE' },
        { endpointName: 'many.nowhere', kind: 'IMMEDIATE' },
      ],
    });
    expect(missing.errors?.[0]?.extensions).toMatchObject({ code: 'NOT_FOUND', index: 1 });
    expect(missing.errors?.[0]?.message).toMatch(/^jobs\.1: /);
    const locked = await g.gql(CREATE, {
      jobs: [
        { endpointName: 'many.plain', kind: 'IMMEDIATE', lockKey: 'same' },
        { endpointName: 'many.plain', kind: 'IMMEDIATE', lockKey: 'same' },
      ],
    });
    expect(locked.errors?.[0]?.extensions).toMatchObject({ code: 'LOCK_HELD', index: 1 });
    // None, and more than 1,000.
    const none = await g.gql(CREATE, { jobs: [] });
    expect(none.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    const tooMany = await g.gql(CREATE, { jobs: Array.from({ length: 1001 }, () => ({ endpointName: 'many.plain', kind: 'IMMEDIATE' })) });
    expect(tooMany.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    // A VIEWER may not.
    const viewer = await g.gql(CREATE, { jobs: [{ endpointName: 'many.plain', kind: 'IMMEDIATE' }] }, { ...t.actor, role: 'VIEWER' });
    expect(viewer.errors?.[0]?.extensions).toMatchObject({ code: 'FORBIDDEN' });
    expect(await count(`select count(*) as n from jobs`)).toBe(jobsBefore);
    expect(await count(`select count(*) as n from executions`)).toBe(executionsBefore);
    // One refusal row per refused call, none for what rolled back.
    const refusals = await t.query(`select result_code from audit_log order by id offset $1`, [auditBefore]);
    expect(refusals.rows.map((r) => r.result_code)).toEqual([
      'VALIDATION_FAILED',
      'VALIDATION_FAILED',
      'NOT_FOUND',
      'LOCK_HELD',
      'VALIDATION_FAILED',
      'VALIDATION_FAILED',
      'FORBIDDEN',
    ]);
  });

  it('honours idempotency keys within one call and across calls, and refuses a key reused with a different request', async () => {
    const job = { endpointName: 'many.plain', kind: 'IMMEDIATE', idempotencyKey: 'once', input: { a: 1 } };
    const first = await g.gql(CREATE, { jobs: [job, job] });
    expect(first.errors).toBeUndefined();
    const [a, b] = first.data.createJobs.results;
    expect([a.created, b.created]).toEqual([true, false]);
    expect(b.job.id).toBe(a.job.id);
    const again = await g.gql(CREATE, { jobs: [job] });
    expect(again.data.createJobs.results[0]).toMatchObject({ created: false, job: { id: a.job.id } });
    const changed = await g.gql(CREATE, {
      jobs: [
        { endpointName: 'many.plain', kind: 'IMMEDIATE' },
        { ...job, input: { a: 2 } },
      ],
    });
    expect(changed.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', index: 1, field: 'input' });
    expect(await count(`select count(*) as n from jobs where idempotency_key = 'once'`)).toBe(1);
  });

  it('creates 1,000 jobs in one call through the service, in the order asked, and the engine runs them all', async () => {
    const jobs = Array.from({ length: 1000 }, (_, i) => ({ endpointName: 'many.run', kind: 'IMMEDIATE' as const, input: { i } }));
    const results = await t.service.createJobs(t.actor, jobs);
    expect(results).toHaveLength(1000);
    expect(new Set(results.map((r) => r.job.id)).size).toBe(1000);
    expect(results.map((r) => (r.job.input as { i: number }).i)).toEqual(jobs.map((j) => j.input.i));
    await h.worker();
    await eventually(async () => ran === 1000, 30_000, '1,000 handler runs');
    expect(await jobsOn('many.run')).toBe(1000);
  });
});

/**
 * Debounce and throttle (createJob's `whenLocked`): what a create does when another job holds its
 * lock key, alone and with twenty creates of one key at once, over the service and GraphQL.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
  g = createTestGateway(t);
});
beforeEach(async () => {
  await t.reset();
  await t.service.registerEndpoint(t.actor, { name: 'locked.target', kind: 'HANDLER', handlerName: 'absent' });
  await t.service.registerEndpoint(t.actor, { name: 'locked.other', kind: 'HANDLER', handlerName: 'absent' });
});
afterAll(async () => {
  await g?.close();
  await t?.close();
});

const inMinutes = (m: number) => new Date(Date.now() + m * 60_000);
const delayed = (n: number, whenLocked: 'THROTTLE' | 'DEBOUNCE' | 'REFUSE' | undefined, endpointName = 'locked.target') =>
  t.service.createJob(t.actor, {
    endpointName,
    kind: 'DELAYED',
    runAt: inMinutes(10 + n),
    input: { n },
    lockKey: 'customer-7',
    ...(whenLocked ? { whenLocked } : {}),
  });
const liveWithKey = async () =>
  (
    await t.query(
      `select e.job_id, e.input, e.run_after, e.scheduled_for, j.input as job_input, j.run_at
       from executions e join jobs j on j.id = e.job_id
       where e.lock_key = 'customer-7' and e.status in ('PENDING', 'RUNNING')`,
    )
  ).rows;
const jobCount = async () => (await t.query(`select count(*)::int as n from jobs where lock_key = 'customer-7'`)).rows[0].n as number;

describe('whenLocked', () => {
  it('THROTTLE: creates nothing while the key is held, pending or running, and answers with the holder', async () => {
    const first = await delayed(1, 'THROTTLE');
    expect(first).toMatchObject({ created: true, outcome: 'CREATED' });
    const second = await delayed(2, 'THROTTLE');
    expect(second).toMatchObject({ created: false, outcome: 'THROTTLED', job: { id: first.job.id, input: { n: 1 } } });
    // Running: still the holder's.
    await t.query(`update executions set status = 'RUNNING', attempt_count = 1 where job_id = $1`, [first.job.id]);
    expect(await delayed(3, 'THROTTLE')).toMatchObject({ outcome: 'THROTTLED', job: { id: first.job.id } });
    expect(await jobCount()).toBe(1);
    // Once the key is free, it creates.
    await t.query(`update executions set status = 'SUCCEEDED', finished_at = now() where job_id = $1`, [first.job.id]);
    expect(await delayed(4, 'THROTTLE')).toMatchObject({ created: true, outcome: 'CREATED' });
  });

  it("DEBOUNCE: the pending holder takes the request's input and start; once it has started, LOCK_HELD", async () => {
    const first = await delayed(1, 'DEBOUNCE');
    const later = await delayed(5, 'DEBOUNCE');
    expect(later).toMatchObject({ created: false, outcome: 'DEBOUNCED', job: { id: first.job.id, input: { n: 5 } } });
    const [live] = await liveWithKey();
    expect(live).toMatchObject({ job_id: first.job.id, input: { n: 5 }, job_input: { n: 5 } });
    expect(Math.abs(live.run_after.getTime() - inMinutes(15).getTime())).toBeLessThan(5_000);
    expect(live.scheduled_for).toEqual(live.run_after);
    expect(live.run_at).toEqual(live.run_after);
    expect(later.job.runAt).toEqual(live.run_at);

    // An IMMEDIATE debounce brings it forward to now.
    const now = await t.service.createJob(t.actor, {
      endpointName: 'locked.target',
      kind: 'IMMEDIATE',
      input: { n: 0 },
      lockKey: 'customer-7',
      whenLocked: 'DEBOUNCE',
    });
    expect(now.outcome).toBe('DEBOUNCED');
    expect((await liveWithKey())[0].run_after.getTime()).toBeLessThanOrEqual(Date.now() + 1000);

    // Another endpoint's job cannot be given this request: LOCK_HELD, nothing changes.
    expect(await codeOf(() => delayed(6, 'DEBOUNCE', 'locked.other'))).toBe('LOCK_HELD');
    // Started: too late to change it.
    await t.query(`update executions set status = 'RUNNING', attempt_count = 1 where job_id = $1`, [first.job.id]);
    expect(await codeOf(() => delayed(7, 'DEBOUNCE'))).toBe('LOCK_HELD');
    expect((await liveWithKey())[0].input).toEqual({ n: 0 });
    expect(await jobCount()).toBe(1);
    // Without a policy, as before.
    expect(await codeOf(() => delayed(8, undefined))).toBe('LOCK_HELD');
    expect(await codeOf(() => delayed(9, 'REFUSE'))).toBe('LOCK_HELD');
  });

  it.each(['THROTTLE', 'DEBOUNCE'] as const)(
    '%s: twenty creates of one key at once make one job; the others each find it',
    async (policy) => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => delayed(i, policy)));
      expect(results.filter((r) => r.outcome === 'CREATED')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === (policy === 'THROTTLE' ? 'THROTTLED' : 'DEBOUNCED'))).toHaveLength(19);
      expect(new Set(results.map((r) => r.job.id)).size).toBe(1);
      expect(await jobCount()).toBe(1);
      const live = await liveWithKey();
      expect(live).toHaveLength(1);
      if (policy === 'THROTTLE') expect(live[0].input).toEqual(results.find((r) => r.created)!.job.input);
      // Debounced: the input and start of one of the requests, together.
      else expect(Math.abs(live[0].run_after.getTime() - inMinutes(10 + (live[0].input as { n: number }).n).getTime())).toBeLessThan(5_000);
    },
  );

  it('refuses a policy without a lock key, or on a cron job, with VALIDATION_FAILED naming whenLocked, creating nothing', async () => {
    const noKey = await g.gql(
      `mutation { createJob(input: { endpointName: "locked.target", kind: IMMEDIATE, whenLocked: DEBOUNCE }) { created } }`,
    );
    expect(noKey.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['whenLocked'] }] });
    const cron = await g.gql(
      `mutation { createJob(input: { endpointName: "locked.target", kind: CRON, cron: { expression: "* * * * *" }, lockKey: "k", whenLocked: THROTTLE }) { created } }`,
    );
    expect(cron.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['whenLocked'] }] });
    expect(
      (await t.query(`select count(*)::int as n from jobs where endpoint_id in (select id from endpoints where name = 'locked.target')`))
        .rows[0].n,
    ).toBe(0);
  });

  it('says over GraphQL which happened', async () => {
    const create = `mutation ($input: JSON) { createJob(input: { endpointName: "locked.target", kind: IMMEDIATE, input: $input, lockKey: "customer-7", whenLocked: THROTTLE }) { created outcome job { id } } }`;
    const a = await g.gql(create, { input: { n: 1 } });
    const b = await g.gql(create, { input: { n: 2 } });
    expect(a.data.createJob).toMatchObject({ created: true, outcome: 'CREATED' });
    expect(b.data.createJob).toEqual({ created: false, outcome: 'THROTTLED', job: { id: a.data.createJob.job.id } });
  });
});

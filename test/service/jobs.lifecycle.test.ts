import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let endpointId: string;
let internalId: string;

beforeAll(async () => {
  t = await createTestDb();
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'work.do', kind: 'HANDLER', handlerName: 'do' })).id;
  internalId = (
    await t.service.registerEndpoint(t.systemActor, { name: 'system.reaper', kind: 'HANDLER', handlerName: 'reaper' }, { type: 'INTERNAL' })
  ).id;
});
afterAll(() => t.close());

const cronJob = async () =>
  (await t.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '0 * * * *', timezone: 'UTC' } })).job;

describe('cancelJob', () => {
  it('retires the job, cancels its pending executions and stops its schedule', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    const result = await t.service.cancelJob(t.actor, job.id);
    expect(result.job.status).toBe('RETIRED');
    expect(result.job.retiredAt).toBeInstanceOf(Date);
    expect(result.cancelledExecutions).toBe(1);
    const { rows } = await t.query('select status, finished_at from executions where job_id = $1', [job.id]);
    expect(rows).toEqual([{ status: 'CANCELLED', finished_at: expect.any(Date) }]);

    const cron = await cronJob();
    expect(cron.cron?.nextFireAt).not.toBeNull();
    const cancelled = await t.service.cancelJob(t.actor, cron.id);
    expect(cancelled.job.cron?.nextFireAt).toBeNull();
  });

  it('counts the running executions it asks to stop apart from the pending ones it cancels', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    const manual = await t.service.triggerJob(t.actor, { id: job.id, force: true });
    // The scheduled execution running, as a worker's claim leaves it.
    await t.query(
      `update executions set status = 'RUNNING', lease_owner = 'w-1', lease_epoch = lease_epoch + 1, attempt_count = 1,
              lease_expires_at = now() + interval '1 minute', attempt_started_at = now()
       where job_id = $1 and id <> $2`,
      [job.id, manual.execution.id],
    );
    const result = await t.service.cancelJob(t.actor, job.id);
    // It read 0 cancelled for a job whose running execution then ended CANCELLED.
    expect(result).toMatchObject({ cancelledExecutions: 1, stoppingExecutions: 1 });
    const { rows } = await t.query('select status, cancel_requested_at from executions where job_id = $1 order by status', [job.id]);
    expect(rows).toEqual([
      { status: 'CANCELLED', cancel_requested_at: null },
      { status: 'RUNNING', cancel_requested_at: expect.any(Date) },
    ]);
  });

  it('does it all in one transaction: when cancelling the executions fails, the job stays ACTIVE', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    await t.query(`create function refuse_cancel() returns trigger language plpgsql as $$
      begin if new.status = 'CANCELLED' then raise exception 'cancel refused by test'; end if; return new; end $$`);
    await t.query('create trigger refuse_cancel before update on executions for each row execute function refuse_cancel()');
    try {
      await expect(t.service.cancelJob(t.actor, job.id)).rejects.toThrow(/cancel refused by test/);
    } finally {
      await t.query('drop trigger refuse_cancel on executions');
    }
    const { rows } = await t.query('select status, retired_at from jobs where id = $1', [job.id]);
    expect(rows[0]).toEqual({ status: 'ACTIVE', retired_at: null });
    const ex = await t.query('select status from executions where job_id = $1', [job.id]);
    expect(ex.rows[0].status).toBe('PENDING');
  });

  it('refuses to cancel a retired job with RETIRED', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    await t.service.cancelJob(t.actor, job.id);
    expect(await codeOf(() => t.service.cancelJob(t.actor, job.id))).toBe('RETIRED');
  });

  it('refuses to cancel an internal job with FORBIDDEN, and changes nothing', async () => {
    const { job } = await t.service.createJob(t.systemActor, { endpointId: internalId, kind: 'IMMEDIATE' });
    expect(await codeOf(() => t.service.cancelJob(t.actor, job.id))).toBe('FORBIDDEN');
    expect((await t.service.job(t.actor, job.id)).status).toBe('ACTIVE');
    // jobgate itself may.
    expect((await t.service.cancelJob(t.systemActor, job.id)).job.status).toBe('RETIRED');
  });
});

describe('updateJob', () => {
  it('changes input (validated), name and max attempts, also of pending executions', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: { a: 1 } });
    const updated = await t.service.updateJob(t.actor, { id: job.id, input: { a: 2 }, name: 'renamed', maxAttempts: 9 });
    expect(updated).toMatchObject({ input: { a: 2 }, name: 'renamed', maxAttempts: 9 });
    const { rows } = await t.query('select max_attempts from executions where job_id = $1', [job.id]);
    expect(rows[0].max_attempts).toBe(9);
  });

  it('treats an explicit null input as no input ({}), as createJob does, so the job stays readable', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: { a: 1 } });
    expect((await t.service.updateJob(t.actor, { id: job.id, input: null })).input).toEqual({});
    expect((await t.query('select input from jobs where id = $1', [job.id])).rows[0].input).toEqual({});
    // Job.input is non-null: a stored JSON null answered the client an internal error for a committed change.
    const g = createTestGateway(t);
    const res = await g.gql(`mutation ($input: UpdateJobInput!) { updateJob(input: $input) { input } }`, {
      input: { id: job.id, input: null },
    });
    expect(res).toEqual({ data: { updateJob: { input: {} } } });
  });

  it('moves a DELAYED job and its pending execution to the new runAt', async () => {
    const runAt = new Date(Date.now() + 60_000);
    const later = new Date(Date.now() + 7_200_000);
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt });
    const updated = await t.service.updateJob(t.actor, { id: job.id, runAt: later });
    expect(updated.runAt?.toISOString()).toBe(later.toISOString());
    const { rows } = await t.query('select scheduled_for from executions where job_id = $1', [job.id]);
    expect(new Date(rows[0].scheduled_for).toISOString()).toBe(later.toISOString());
  });

  it('moves only the scheduled execution of a DELAYED job, never a manual trigger', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt: new Date(Date.now() + 60_000) });
    const manual = await t.service.triggerJob(t.actor, { id: job.id, force: true });
    const later = new Date(Date.now() + 7_200_000);
    await t.service.updateJob(t.actor, { id: job.id, runAt: later });
    const { rows } = await t.query('select trigger, scheduled_for from executions where job_id = $1 order by trigger', [job.id]);
    expect(rows.find((r) => r.trigger === 'SCHEDULE').scheduled_for.toISOString()).toBe(later.toISOString());
    expect(rows.find((r) => r.trigger === 'MANUAL').scheduled_for.toISOString()).toBe(manual.execution.scheduledFor.toISOString());
  });

  it('recomputes the next fire time when the cron schedule changes', async () => {
    const job = await cronJob();
    const updated = await t.service.updateJob(t.actor, { id: job.id, cron: { expression: '30 4 * * *', timezone: 'Asia/Tokyo' } });
    expect(updated.cron).toMatchObject({ expression: '30 4 * * *', timezone: 'Asia/Tokyo' });
    const next = updated.cron!.nextFireAt!;
    // 04:30 in Tokyo (UTC+9, no DST) is 19:30 UTC.
    expect([next.getUTCHours(), next.getUTCMinutes()]).toEqual([19, 30]);
  });

  it('refuses a retired job with RETIRED and an internal one with FORBIDDEN', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    await t.service.cancelJob(t.actor, job.id);
    expect(await codeOf(() => t.service.updateJob(t.actor, { id: job.id, name: 'x' }))).toBe('RETIRED');
    const internal = await t.service.createJob(t.systemActor, { endpointId: internalId, kind: 'IMMEDIATE' });
    expect(await codeOf(() => t.service.updateJob(t.actor, { id: internal.job.id, name: 'x' }))).toBe('FORBIDDEN');
  });

  it('refuses schedule fields that do not fit the job kind', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE' });
    expect(await codeOf(() => t.service.updateJob(t.actor, { id: job.id, cron: { expression: '* * * * *' } }))).toBe('VALIDATION_FAILED');
    expect(await codeOf(() => t.service.updateJob(t.actor, { id: job.id, runAt: new Date() }))).toBe('VALIDATION_FAILED');
  });

  it('validates new input against the payload spec and changes nothing when it fails', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, {
      name: 'needs.n',
      jsonSchema: { type: 'object', required: ['n'], properties: { n: { type: 'number' } } },
    });
    const ep = await t.service.registerEndpoint(t.actor, {
      name: 'spec.checked',
      kind: 'HANDLER',
      handlerName: 'x',
      payloadSpecId: spec.id,
    });
    const { job } = await t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE', input: { n: 1 } });
    expect(await codeOf(() => t.service.updateJob(t.actor, { id: job.id, input: { n: 'one' }, name: 'changed' }))).toBe(
      'VALIDATION_FAILED',
    );
    expect(await t.service.job(t.actor, job.id)).toMatchObject({ input: { n: 1 }, name: null });
  });
});

describe('pauseJob and resumeJob', () => {
  it('pausing a cron job clears its next fire time; resuming continues from now', async () => {
    const job = await cronJob();
    const paused = await t.service.pauseJob(t.actor, job.id);
    expect(paused.status).toBe('PAUSED');
    expect(paused.cron?.nextFireAt).toBeNull();
    expect((await t.service.pauseJob(t.actor, job.id)).status).toBe('PAUSED');
    // Between two readings of the database's clock around the resume, so the bounds hold
    // however long the resume takes (a reading after it alone made the lower bound a guess).
    const dbNow = async () => (await t.query<{ now: Date }>('select now() as now')).rows[0]!.now.getTime();
    const before = await dbNow();
    const resumed = await t.service.resumeJob(t.actor, job.id);
    const after = await dbNow();
    expect(resumed.status).toBe('ACTIVE');
    // The first full hour after the resume: not one missed while paused, at most an hour away.
    const next = resumed.cron!.nextFireAt!.getTime();
    expect(next % 3_600_000).toBe(0);
    expect(next).toBeGreaterThan(before);
    expect(next).toBeLessThanOrEqual(after + 3_600_000);
  });

  it('uses the injected clock for schedule computations', async () => {
    const fixed = new Date('2030-01-01T10:07:00Z');
    const { createJobService } = await import('../../src/service/index.js');
    const svc = createJobService({ db: t.db, defaultMaxAttempts: 5, clock: async () => fixed });
    const { job } = await svc.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '0 * * * *' } });
    expect(job.cron?.nextFireAt?.toISOString()).toBe('2030-01-01T11:00:00.000Z');
  });

  it('refuses a retired job with RETIRED', async () => {
    const job = await cronJob();
    await t.service.cancelJob(t.actor, job.id);
    expect(await codeOf(() => t.service.pauseJob(t.actor, job.id))).toBe('RETIRED');
    expect(await codeOf(() => t.service.resumeJob(t.actor, job.id))).toBe('RETIRED');
  });
});

describe('cron schedule bounds', () => {
  it('starts no earlier than startsAt', async () => {
    const startsAt = new Date('2031-06-01T00:00:00Z');
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'CRON', cron: { expression: '0 12 * * *', startsAt } });
    expect(job.cron?.nextFireAt?.toISOString()).toBe('2031-06-01T12:00:00.000Z');
  });

  it('refuses a schedule that has already ended', async () => {
    expect(
      await codeOf(() =>
        t.service.createJob(t.actor, {
          endpointId,
          kind: 'CRON',
          cron: { expression: '0 12 * * *', startsAt: new Date('2020-01-01T00:00:00Z'), endsAt: new Date('2020-01-01T06:00:00Z') },
        }),
      ),
    ).toBe('VALIDATION_FAILED');
  });
});

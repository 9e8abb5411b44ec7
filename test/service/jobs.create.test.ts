import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobService } from '../../src/service/index.js';
import { ValidationError } from '../../src/service/kernel/errors.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let endpointId: string;

beforeAll(async () => {
  t = await createTestDb();
  const spec = await t.service.createPayloadSpec(t.actor, {
    name: 'billing.invoice',
    jsonSchema: {
      type: 'object',
      required: ['customerId', 'amount'],
      properties: { customerId: { type: 'string' }, amount: { type: 'integer', minimum: 1 } },
      additionalProperties: false,
    },
  });
  const ep = await t.service.registerEndpoint(t.actor, {
    name: 'billing.send-invoice',
    kind: 'HTTP',
    url: 'https://billing.example/hooks/invoice',
    payloadSpecId: spec.id,
    maxAttempts: 7,
  });
  endpointId = ep.id;
  await t.service.registerEndpoint(t.actor, { name: 'plain.task', kind: 'HANDLER', handlerName: 'plain' });
});
afterAll(() => t.close());

const invoice = { customerId: 'c-1', amount: 100 };

describe('createJob', () => {
  it('creates an IMMEDIATE job with one execution due now, in the same transaction', async () => {
    const before = (await t.query<{ now: Date }>('select now() as now')).rows[0]!.now;
    const { job, created } = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice });
    expect(created).toBe(true);
    expect(job.status).toBe('ACTIVE');
    const { rows } = await t.query('select * from executions where job_id = $1', [job.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe('PENDING');
    expect(rows[0].max_attempts).toBe(7);
    expect(new Date(rows[0].scheduled_for).getTime()).toBeGreaterThanOrEqual(before.getTime());
  });

  it('creates a DELAYED job whose execution is due at runAt', async () => {
    const runAt = new Date(Date.now() + 3_600_000);
    const { job } = await t.service.createJob(t.actor, { endpointId, kind: 'DELAYED', runAt, input: invoice });
    const { rows } = await t.query('select scheduled_for, run_after from executions where job_id = $1', [job.id]);
    expect(rows).toHaveLength(1);
    expect(new Date(rows[0].scheduled_for).toISOString()).toBe(runAt.toISOString());
    expect(new Date(rows[0].run_after).toISOString()).toBe(runAt.toISOString());
  });

  it('creates a CRON job with its first next_fire_at and no execution yet', async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'plain.task',
      kind: 'CRON',
      cron: { expression: '*/15 * * * *', timezone: 'Europe/Paris' },
    });
    expect(job.cron?.timezone).toBe('Europe/Paris');
    expect(job.cron?.misfirePolicy).toBe('FIRE_LATEST');
    expect(job.cron?.overlapPolicy).toBe('SKIP');
    const next = job.cron!.nextFireAt!;
    // The next quarter hour after the job was created, both on the database's clock.
    const created: Date = (await t.query('select created_at from jobs where id = $1', [job.id])).rows[0].created_at;
    expect(next.getTime()).toBeGreaterThan(created.getTime());
    expect(next.getTime()).toBeLessThanOrEqual(created.getTime() + 15 * 60_000);
    expect(next.getUTCMinutes() % 15).toBe(0);
    const { rows } = await t.query('select count(*)::int as n from executions where job_id = $1', [job.id]);
    expect(rows[0].n).toBe(0);
  });

  it('resolves max attempts: job override, else endpoint, else the default', async () => {
    const a = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, maxAttempts: 2 });
    const b = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice });
    const c = await t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'IMMEDIATE' });
    expect([a.job.maxAttempts, b.job.maxAttempts, c.job.maxAttempts]).toEqual([2, 7, 5]);
  });

  it('lets two keyless jobs on one endpoint both be created, storing the key as NULL', async () => {
    const a = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice });
    const b = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice });
    expect(a.job.id).not.toBe(b.job.id);
    const { rows } = await t.query('select idempotency_key from jobs where id = any($1)', [[a.job.id, b.job.id]]);
    expect(rows.map((r) => r.idempotency_key)).toEqual([null, null]);
  });

  it('refuses an empty idempotency key instead of storing ""', async () => {
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, idempotencyKey: '' }))).toBe(
      'VALIDATION_FAILED',
    );
  });

  it('returns the existing job with created: false when a key is reused with the same request', async () => {
    const first = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, idempotencyKey: 'inv-1' });
    // Same content, keys in another order: jsonb compares by content.
    const again = await t.service.createJob(t.actor, {
      endpointId,
      kind: 'IMMEDIATE',
      input: { amount: 100, customerId: 'c-1' },
      idempotencyKey: 'inv-1',
    });
    expect(again.created).toBe(false);
    expect(again.job.id).toBe(first.job.id);
    const { rows } = await t.query('select count(*)::int as n from executions where job_id = $1', [first.job.id]);
    expect(rows[0].n).toBe(1);
  });

  it('is CONFLICT when a key is reused with a different input, and changes nothing', async () => {
    await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, idempotencyKey: 'inv-2' });
    const before = (await t.query('select count(*)::int as n from jobs')).rows[0].n;
    expect(
      await codeOf(() =>
        t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: { ...invoice, amount: 5 }, idempotencyKey: 'inv-2' }),
      ),
    ).toBe('CONFLICT');
    expect((await t.query('select count(*)::int as n from jobs')).rows[0].n).toBe(before);
  });

  it('is CONFLICT, naming the field, when a key is reused with a different name, max attempts, lock key or schedule', async () => {
    const plain = {
      endpointName: 'plain.task',
      kind: 'IMMEDIATE' as const,
      idempotencyKey: 'opts-1',
      name: 'n',
      maxAttempts: 3,
      lockKey: 'opts-lock',
    };
    const first = await t.service.createJob(t.actor, plain);
    for (const [change, field] of [
      [{ name: 'other' }, 'name'],
      [{ maxAttempts: 4 }, 'maxAttempts'],
      [{ lockKey: 'another-lock' }, 'lockKey'],
      [{ lockKey: null }, 'lockKey'],
    ] as const) {
      const error = await t.service.createJob(t.actor, { ...plain, ...change }).catch((e) => e);
      expect(error, field).toMatchObject({ code: 'CONFLICT', details: { field, jobId: first.job.id } });
    }
    // Leaving out maxAttempts is not a different request: it was resolved, not asked for.
    const { maxAttempts: _omitted, ...withoutMax } = plain;
    expect((await t.service.createJob(t.actor, withoutMax)).created).toBe(false);

    const cron = { expression: '0 * * * *', startsAt: new Date('2031-01-01T00:00:00Z'), endsAt: new Date('2032-01-01T00:00:00Z') };
    const scheduled = { endpointName: 'plain.task', kind: 'CRON' as const, idempotencyKey: 'opts-2', cron };
    await t.service.createJob(t.actor, scheduled);
    for (const [change, field] of [
      [{ startsAt: new Date('2031-02-01T00:00:00Z') }, 'cron.startsAt'],
      [{ endsAt: null }, 'cron.endsAt'],
      [{ misfirePolicy: 'SKIP' }, 'cron.misfirePolicy'],
      [{ overlapPolicy: 'ALLOW' }, 'cron.overlapPolicy'],
    ] as const) {
      const error = await t.service.createJob(t.actor, { ...scheduled, cron: { ...cron, ...change } }).catch((e) => e);
      expect(error, field).toMatchObject({ code: 'CONFLICT', details: { field } });
    }
    // The defaults, spelt out, are the same request.
    const spelt = { ...cron, timezone: 'UTC', misfirePolicy: 'FIRE_LATEST' as const, overlapPolicy: 'SKIP' as const };
    expect((await t.service.createJob(t.actor, { ...scheduled, cron: spelt })).created).toBe(false);
  });

  it('scopes idempotency keys per endpoint', async () => {
    const a = await t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, idempotencyKey: 'shared' });
    const b = await t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'IMMEDIATE', idempotencyKey: 'shared' });
    expect(b.created).toBe(true);
    expect(b.job.id).not.toBe(a.job.id);
  });

  it('converges concurrent creates with one key on a single job', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, idempotencyKey: 'race-1' }),
      ),
    );
    const ids = new Set(results.map((r) => r.job.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const { rows } = await t.query("select count(*)::int as n from jobs where idempotency_key = 'race-1'");
    expect(rows[0].n).toBe(1);
    const ex = await t.query('select count(*)::int as n from executions where job_id = $1', [[...ids][0]]);
    expect(ex.rows[0].n).toBe(1);
  });

  it('rejects input that breaks the payload spec with the path of each bad field', async () => {
    const error = await t.service
      .createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: { customerId: 42, amount: 0 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    const issues = (error as ValidationError).issues;
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: ['input', 'customerId'], message: 'must be string' },
        { path: ['input', 'amount'], message: 'must be >= 1' },
      ]),
    );
    const missing = (await t.service
      .createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: { customerId: 'x' } })
      .catch((e: unknown) => e)) as ValidationError;
    expect(missing.issues).toContainEqual({ path: ['input', 'amount'], message: 'is required' });
  });

  it('refuses jobs on INTERNAL endpoints for users, and lets jobgate itself create them', async () => {
    const internal = await t.service.registerEndpoint(
      t.systemActor,
      { name: 'system.reaper', kind: 'HANDLER', handlerName: 'reaper' },
      { type: 'INTERNAL' },
    );
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId: internal.id, kind: 'IMMEDIATE' }))).toBe('INTERNAL_ENDPOINT');
    const { created } = await t.service.createJob(t.systemActor, { endpointId: internal.id, kind: 'IMMEDIATE' });
    expect(created).toBe(true);
  });

  it('names the offending cron field of an invalid expression', async () => {
    const error = (await t.service
      .createJob(t.actor, { endpointName: 'plain.task', kind: 'CRON', cron: { expression: '0 25 * * *' } })
      .catch((e: unknown) => e)) as ValidationError;
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues[0]!.path).toEqual(['cron', 'expression']);
    expect(error.issues[0]!.message).toMatch(/^hour field "25"/);
    const six = (await t.service
      .createJob(t.actor, { endpointName: 'plain.task', kind: 'CRON', cron: { expression: '0 0 * * * *' } })
      .catch((e: unknown) => e)) as ValidationError;
    expect(six.issues[0]!.message).toMatch(/5 fields.*seconds are not supported/);
  });

  it('refuses an unknown time zone, naming the timezone field', async () => {
    const error = (await t.service
      .createJob(t.actor, { endpointName: 'plain.task', kind: 'CRON', cron: { expression: '0 * * * *', timezone: 'Mars/Olympus' } })
      .catch((e: unknown) => e)) as ValidationError;
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues).toEqual([{ path: ['cron', 'timezone'], message: expect.stringMatching(/IANA time zone/) }]);
  });

  it('checks kind-specific fields: DELAYED needs runAt, CRON needs cron, and not the other way round', async () => {
    const delayed = (await t.service
      .createJob(t.actor, { endpointId, kind: 'DELAYED', input: invoice })
      .catch((e) => e)) as ValidationError;
    expect(delayed.issues).toContainEqual({ path: ['runAt'], message: 'is required for a DELAYED job' });
    const imm = (await t.service
      .createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, cron: { expression: '* * * * *' } })
      .catch((e) => e)) as ValidationError;
    expect(imm.issues).toContainEqual({ path: ['cron'], message: 'is only for CRON jobs' });
  });

  it('is NOT_FOUND for an unknown endpoint and for a malformed id', async () => {
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointName: 'no.such', kind: 'IMMEDIATE' }))).toBe('NOT_FOUND');
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId: 'not-a-uuid', kind: 'IMMEDIATE' }))).toBe('NOT_FOUND');
  });

  it('refuses jobs on an archived endpoint', async () => {
    const ep = await t.service.registerEndpoint(t.actor, { name: 'old.target', kind: 'HANDLER', handlerName: 'old' });
    await t.service.archiveEndpoint(t.actor, ep.id);
    expect(await codeOf(() => t.service.createJob(t.actor, { endpointId: ep.id, kind: 'IMMEDIATE' }))).toBe('ARCHIVED');
  });

  it('refuses text Postgres cannot store, and still records the refusal in the audit log', async () => {
    const name = 'nul\u0000name';
    const error = await t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'IMMEDIATE', name }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).issues.map((i) => i.path)).toEqual([['name']]);
    const { rows } = await t.query(
      "select result_code, input->>'name' as name from audit_log where action = 'job.create' order by id desc limit 1",
    );
    // Stored with the NUL replaced: the refused input is on record, as close to what was sent as Postgres allows.
    expect(rows).toEqual([{ result_code: 'VALIDATION_FAILED', name: 'nul\ufffdname' }]);
  });

  it('refuses input that is not JSON (a bigint, a cycle, nesting 10,000 deep) as VALIDATION_FAILED, and audits each refusal', async () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const inputs = [{ n: 10n }, cyclic, deep];
    for (const [i, input] of inputs.entries()) {
      const name = `not-json-${i}`;
      expect(await codeOf(() => t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'IMMEDIATE', name, input }))).toBe(
        'VALIDATION_FAILED',
      );
      const { rows } = await t.query("select result_code from audit_log where action = 'job.create' and input->>'name' = $1", [name]);
      expect(rows, name).toEqual([{ result_code: 'VALIDATION_FAILED' }]);
    }
  });

  it('refuses a date before the earliest Postgres can store (4714 BC) as VALIDATION_FAILED naming the field', async () => {
    const earliest = new Date('-004713-11-24T00:00:00.000Z');
    const before = new Date(earliest.getTime() - 1);
    for (const runAt of [before, new Date(-8.64e15), '-010000-01-01T00:00:00Z']) {
      const error = await t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'DELAYED', runAt }).catch((e) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues.map((i) => i.path)).toEqual([['runAt']]);
    }
    const cron = await t.service
      .createJob(t.actor, { endpointName: 'plain.task', kind: 'CRON', cron: { expression: '0 * * * *', startsAt: before } })
      .catch((e) => e);
    expect((cron as ValidationError).issues.map((i) => i.path)).toEqual([['cron', 'startsAt']]);
    // The earliest instant itself is storable: a DELAYED job that long overdue simply runs now.
    const { job } = await t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'DELAYED', runAt: earliest });
    expect(job.runAt?.toISOString()).toBe(earliest.toISOString());
  });

  it('commits the job and its first execution together or not at all', async () => {
    // Make the execution insert fail: the job insert before it must roll back with it.
    await t.query(`create function refuse_execution() returns trigger language plpgsql as $$
      begin if new.max_attempts = 99 then raise exception 'refused by test'; end if; return new; end $$`);
    await t.query('create trigger refuse_execution before insert on executions for each row execute function refuse_execution()');
    try {
      const before = (await t.query('select count(*)::int as n from jobs')).rows[0].n;
      await expect(t.service.createJob(t.actor, { endpointId, kind: 'IMMEDIATE', input: invoice, maxAttempts: 99 })).rejects.toThrow(
        /refused by test/,
      );
      expect((await t.query('select count(*)::int as n from jobs')).rows[0].n).toBe(before);
    } finally {
      await t.query('drop trigger refuse_execution on executions');
    }
  });

  it('commits the job, its execution and its audit row together or not at all on the one-statement path too', async () => {
    // plain.task has no payload spec and the job no key: createJob writes it in one statement.
    await t.query(`create function refuse_first_execution() returns trigger language plpgsql as $$
      begin if new.max_attempts = 98 then raise exception 'refused by test'; end if; return new; end $$`);
    await t.query(
      'create trigger refuse_first_execution before insert on executions for each row execute function refuse_first_execution()',
    );
    try {
      const count = async (table: string) => (await t.query(`select count(*)::int as n from ${table}`)).rows[0].n as number;
      const [jobs, ok] = [await count('jobs'), await count(`audit_log where action = 'job.create' and result_code = 'OK'`)];
      await expect(t.service.createJob(t.actor, { endpointName: 'plain.task', kind: 'IMMEDIATE', maxAttempts: 98 })).rejects.toThrow(
        /refused by test/,
      );
      expect(await count('jobs')).toBe(jobs);
      expect(await count(`audit_log where action = 'job.create' and result_code = 'OK'`)).toBe(ok);
      const { rows } = await t.query(`select result_code from audit_log where action = 'job.create' order by id desc limit 1`);
      expect(rows[0].result_code).toBe('INTERNAL_ERROR');
    } finally {
      await t.query('drop trigger refuse_first_execution on executions');
      await t.query('drop function refuse_first_execution()');
    }
  });

  it('leaves the same job, execution and audit rows on the one-statement path as in the full transaction', async () => {
    // No key: one statement. An idempotency key takes the full transactional path.
    const request = {
      endpointName: 'plain.task',
      kind: 'DELAYED' as const,
      name: 'same rows',
      runAt: new Date(Date.now() + 60_000),
      input: { a: [1, { b: 'c' }] },
      maxAttempts: 3,
    };
    const quick = await t.service.createJob(t.actor, request);
    // Without the pg pool, the one statement goes through kysely (unnamed).
    const unpooled = await createJobService({ db: t.db, defaultMaxAttempts: 5 }).createJob(t.actor, request);
    const full = await t.service.createJob(t.actor, { ...request, idempotencyKey: 'same-rows' });
    const job = async (id: string) => {
      const {
        id: _id,
        idempotency_key: _key,
        created_at: _c,
        updated_at: _u,
        ...rest
      } = (await t.query('select * from jobs where id = $1', [id])).rows[0];
      return rest;
    };
    expect(await job(quick.job.id)).toEqual(await job(full.job.id));
    expect(await job(unpooled.job.id)).toEqual(await job(full.job.id));
    expect(quick.job).toEqual({
      ...full.job,
      id: quick.job.id,
      idempotencyKey: null,
      createdAt: quick.job.createdAt,
      updatedAt: quick.job.updatedAt,
    });
    const execution = async (jobId: string) => {
      const {
        id: _id,
        job_id: _j,
        created_at: _c,
        updated_at: _u,
        ...rest
      } = (await t.query('select * from executions where job_id = $1', [jobId])).rows[0];
      return rest;
    };
    expect(await execution(quick.job.id)).toEqual(await execution(full.job.id));
    expect(await execution(unpooled.job.id)).toEqual(await execution(full.job.id));
    const audit = async (jobId: string) => {
      const {
        id: _id,
        target_id,
        created_at: _c,
        input,
        ...rest
      } = (await t.query(`select * from audit_log where target_id = $1`, [jobId])).rows[0];
      return { ...rest, target: target_id === jobId, input: { ...input, idempotencyKey: undefined } };
    };
    expect(await audit(quick.job.id)).toEqual(await audit(full.job.id));
    expect(await audit(unpooled.job.id)).toEqual(await audit(full.job.id));
  });
});

/**
 * Enqueueing inside the embedding application's own transaction (gate.inTransaction): jobs,
 * executions, runs, audit rows and wake-ups commit or roll back with the caller's work, and no
 * refusal of ours aborts the caller's transaction.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../src/index.js';
import { codeOf, createTestDb, type TestDb } from './support/db.js';
import { eventually, settled } from './support/engine.js';

let t: TestDb;
let gate: Jobgate;
const ran: string[] = [];

beforeAll(async () => {
  t = await createTestDb();
  gate = await createJobgate({ databaseUrl: t.url, migrate: false });
  gate.handle<{ order: string }>('ship', async (input) => void ran.push(input.order));
  await gate.client.registerEndpoint({ name: 'shop.ship', kind: 'HANDLER', handlerName: 'ship', maxAttempts: 1 });
  const spec = await gate.client.createPayloadSpec({ name: 'order', jsonSchema: { type: 'object', required: ['order'] } });
  await gate.client.registerEndpoint({
    name: 'shop.checked',
    kind: 'HANDLER',
    handlerName: 'ship',
    payloadSpecId: spec.id,
    maxAttempts: 1,
  });
  await t.query(`create table orders (id text primary key)`);
});
afterAll(async () => {
  await gate?.close();
  await t?.close();
});

const counts = async () =>
  (
    await t.query<{ jobs: number; executions: number; audits: number; runs: number }>(
      `select (select count(*)::int from jobs where name like 'tx-%') as jobs,
              (select count(*)::int from executions e join jobs j on j.id = e.job_id where j.name like 'tx-%') as executions,
              (select count(*)::int from audit_log where input::text like '%tx-%') as audits,
              (select count(*)::int from runs where name like 'tx-%') as runs`,
    )
  ).rows[0]!;

describe('gate.inTransaction with a pg client inside BEGIN', () => {
  it('leaves no trace when the caller rolls back: no job, execution, run or audit row', async () => {
    const before = await counts();
    const client = await t.database.pool.connect();
    try {
      await client.query('begin');
      await client.query(`insert into orders values ('o-rolled-back')`);
      const inTx = gate.inTransaction(client);
      const { job } = await inTx.createJob({
        endpointName: 'shop.ship',
        kind: 'IMMEDIATE',
        name: 'tx-rolled-back',
        input: { order: 'o-rolled-back' },
      });
      await inTx.triggerRun({ name: 'tx-scan', force: true });
      // The caller's transaction sees them; nobody else does yet.
      expect((await client.query('select count(*)::int as n from jobs where id = $1', [job.id])).rows[0].n).toBe(1);
      expect((await t.query('select count(*)::int as n from jobs where id = $1', [job.id])).rows[0].n).toBe(0);
      await client.query('rollback');
    } finally {
      client.release();
    }
    expect(await counts()).toEqual(before);
  });

  it('runs the job once the caller commits, woken by the notification sent at commit', async () => {
    // A fallback poll far beyond the wait below: only the commit's NOTIFY can start it in time.
    await gate.startWorker({ pollMs: 600_000 });
    const client = await t.database.pool.connect();
    let jobId: string;
    try {
      await client.query('begin');
      await client.query(`insert into orders values ('o-committed')`);
      ({
        job: { id: jobId },
      } = await gate
        .inTransaction(client)
        .createJob({ endpointName: 'shop.ship', kind: 'IMMEDIATE', name: 'tx-committed', input: { order: 'o-committed' } }));
      await client.query('commit');
    } finally {
      client.release();
    }
    await eventually(async () => ran.includes('o-committed'), 20_000, 'the committed job to run');
    // The handler ran; its outcome is recorded just after.
    const ex = await settled(t, jobId!, ['SUCCEEDED', 'FAILED', 'CANCELLED'], 20_000);
    expect(ex.status).toBe('SUCCEEDED');
    expect(
      (
        await t.query(`select count(*)::int as n from audit_log where action = 'job.create' and target_id = $1 and result_code = 'OK'`, [
          jobId,
        ])
      ).rows[0].n,
    ).toBe(1);
  });

  it('keeps the caller transaction usable after every refusal, and commits all of it together', async () => {
    const client = await t.database.pool.connect();
    const codes: string[] = [];
    let keyed: string;
    try {
      await client.query('begin');
      const inTx = gate.inTransaction(client);
      const first = await inTx.createJob({
        endpointName: 'shop.ship',
        kind: 'DELAYED',
        runAt: new Date(Date.now() + 3600_000),
        name: 'tx-keyed',
        input: { order: 'k' },
        idempotencyKey: 'k-1',
      });
      keyed = first.job.id;
      await client.query(`insert into orders values ('after-create')`);
      // An idempotent repeat returns the job already made, in this very transaction.
      const repeat = await inTx.createJob({
        endpointName: 'shop.ship',
        kind: 'DELAYED',
        runAt: first.job.runAt!,
        name: 'tx-keyed',
        input: { order: 'k' },
        idempotencyKey: 'k-1',
      });
      expect(repeat).toMatchObject({ created: false, job: { id: keyed } });
      await client.query(`insert into orders values ('after-repeat')`);
      codes.push(
        await codeOf(() =>
          inTx.createJob({
            endpointName: 'shop.ship',
            kind: 'DELAYED',
            runAt: first.job.runAt!,
            name: 'tx-keyed',
            input: { order: 'other' },
            idempotencyKey: 'k-1',
          }),
        ),
      );
      await client.query(`insert into orders values ('after-conflict')`);
      await inTx.createJob({
        endpointName: 'shop.ship',
        kind: 'DELAYED',
        runAt: new Date(Date.now() + 3600_000),
        name: 'tx-locked',
        input: { order: 'l' },
        lockKey: 'order-l',
      });
      codes.push(
        await codeOf(() =>
          inTx.createJob({ endpointName: 'shop.ship', kind: 'IMMEDIATE', name: 'tx-locked-2', input: { order: 'l' }, lockKey: 'order-l' }),
        ),
      );
      await client.query(`insert into orders values ('after-lock-held')`);
      codes.push(
        await codeOf(() => inTx.createJob({ endpointName: 'shop.ship', kind: 'DELAYED', name: 'tx-invalid', input: {} } as never)),
      );
      codes.push(
        await codeOf(() => inTx.createJob({ endpointName: 'shop.checked', kind: 'IMMEDIATE', name: 'tx-bad-input', input: { nope: 1 } })),
      );
      await client.query(`insert into orders values ('after-validation')`);
      codes.push(await codeOf(() => inTx.createJob({ endpointName: 'no.such-endpoint', kind: 'IMMEDIATE', name: 'tx-missing' })));
      codes.push(await codeOf(() => inTx.createJob({ endpointId: 'not-a-uuid', kind: 'IMMEDIATE', name: 'tx-missing' })));
      await client.query(`insert into orders values ('after-not-found')`);
      // triggerJob refusals: already pending (CONFLICT), its lock key taken (LOCK_HELD with force).
      codes.push(await codeOf(() => inTx.triggerJob({ id: keyed })));
      codes.push(await codeOf(() => inTx.triggerRun({ name: 'not a valid name!' })));
      // No live worker has this recoverable handler: refused, unless forced.
      codes.push(await codeOf(() => inTx.triggerRun({ name: 'tx-unregistered' })));
      const run = await inTx.triggerRun({ name: 'tx-run', force: true });
      const again = await inTx.triggerRun({ name: 'tx-run', force: true });
      expect([run.outcome, again.outcome, again.run.id]).toEqual(['STARTED', 'ACTIVE', run.run.id]);
      await client.query(`insert into orders values ('after-triggers')`);
      await client.query('commit');
    } finally {
      client.release();
    }
    expect(codes).toEqual([
      'CONFLICT',
      'LOCK_HELD',
      'VALIDATION_FAILED',
      'VALIDATION_FAILED',
      'NOT_FOUND',
      'NOT_FOUND',
      'CONFLICT',
      'VALIDATION_FAILED',
      'NOT_FOUND',
    ]);
    const orders = (await t.query(`select id from orders where id like 'after-%' order by id`)).rows.map((r) => r.id);
    expect(orders).toEqual([
      'after-conflict',
      'after-create',
      'after-lock-held',
      'after-not-found',
      'after-repeat',
      'after-triggers',
      'after-validation',
    ]);
    expect(
      (await t.query(`select name from jobs where name like 'tx-keyed' or name like 'tx-locked%' order by name`)).rows.map((r) => r.name),
    ).toEqual(['tx-keyed', 'tx-locked']);
    expect((await t.query(`select count(*)::int as n from runs where name = 'tx-run'`)).rows[0].n).toBe(1);
    expect((await t.query(`select count(*)::int as n from runs where name = 'tx-unregistered'`)).rows[0].n).toBe(0);
    // The refusals are on record with their codes, committed with the rest.
    const refused = (await t.query(`select result_code from audit_log where action = 'job.create' and input::text like '%tx-locked-2%'`))
      .rows;
    expect(refused.map((r) => r.result_code)).toEqual(['LOCK_HELD']);
  });

  it('creates many jobs with the caller: a refused createJobs leaves the transaction usable and nothing of its own, a good one commits with it', async () => {
    const before = await counts();
    const client = await t.database.pool.connect();
    try {
      await client.query('begin');
      const inTx = gate.inTransaction(client);
      const refused = await codeOf(() =>
        inTx.createJobs([
          { endpointName: 'shop.ship', kind: 'IMMEDIATE', name: 'tx-many-refused', input: { order: 'm-0' } },
          { endpointName: 'shop.checked', kind: 'IMMEDIATE', name: 'tx-many-refused', input: { nope: true } },
        ]),
      );
      expect(refused).toBe('VALIDATION_FAILED');
      const results = await inTx.createJobs(
        ['m-1', 'm-2', 'm-3'].map((order) => ({
          endpointName: 'shop.checked',
          kind: 'IMMEDIATE' as const,
          name: 'tx-many',
          input: { order },
        })),
      );
      expect(results.map((r) => r.created)).toEqual([true, true, true]);
      await client.query('commit');
    } finally {
      client.release();
    }
    const after = await counts();
    expect(after.jobs - before.jobs).toBe(3);
    expect(after.executions - before.executions).toBe(3);
    // Three OK rows and the refusal's row (the refused item's input names it).
    expect(after.audits - before.audits).toBe(4);
  });

  it('keeps the caller transaction usable when one of our statements fails in the database', async () => {
    // The caller's own lock timeout, and the endpoint row locked by someone else throughout: our
    // FOR SHARE on it fails with a database error, not a domain refusal.
    const holder = await t.database.pool.connect();
    const client = await t.database.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select 1 from endpoints where name = 'shop.ship' for update`);
      await client.query('begin');
      await client.query(`set local lock_timeout = '100ms'`);
      await client.query(`insert into orders values ('before-lock-timeout')`);
      const inTx = gate.inTransaction(client);
      await expect(
        inTx.createJob({ endpointName: 'shop.ship', kind: 'IMMEDIATE', name: 'tx-timeout', input: { order: 't' } }),
      ).rejects.toMatchObject({ code: '55P03' });
      await expect(
        inTx.createJob({ endpointName: 'shop.ship', kind: 'IMMEDIATE', name: 'tx-timeout', input: { order: 't' }, idempotencyKey: 't-1' }),
      ).rejects.toMatchObject({ code: '55P03' });
      await client.query(`insert into orders values ('after-lock-timeout')`);
      await client.query('commit');
    } finally {
      await holder.query('rollback');
      holder.release();
      client.release();
    }
    expect((await t.query(`select id from orders where id like '%-lock-timeout' order by id`)).rows.map((r) => r.id)).toEqual([
      'after-lock-timeout',
      'before-lock-timeout',
    ]);
    // Both refusals are on record (INTERNAL_ERROR: not a domain error), committed with the caller's rows.
    expect(
      (await t.query(`select result_code from audit_log where input::text like '%tx-timeout%'`)).rows.map((r) => r.result_code),
    ).toEqual(['INTERNAL_ERROR', 'INTERNAL_ERROR']);
  });

  it('refuses a client with no transaction open, changing nothing', async () => {
    const before = await counts();
    const client = await t.database.pool.connect();
    try {
      await expect(
        gate.inTransaction(client).createJob({ endpointName: 'shop.ship', kind: 'IMMEDIATE', name: 'tx-no-begin', input: { order: 'x' } }),
      ).rejects.toThrow(/not open/);
    } finally {
      client.release();
    }
    expect(await counts()).toEqual(before);
  });
});

describe('gate.inTransaction with a Kysely Transaction', () => {
  it('rolls back with the caller: a thrown error in db.transaction() leaves no job and no execution', async () => {
    const before = await counts();
    let jobId: string | undefined;
    await expect(
      t.db.transaction().execute(async (trx) => {
        const inTx = gate.inTransaction(trx);
        ({
          job: { id: jobId },
        } = await inTx.createJob({
          endpointName: 'shop.ship',
          kind: 'DELAYED',
          runAt: new Date(Date.now() + 3600_000),
          name: 'tx-kysely-rolled',
          input: { order: 'k' },
        }));
        // A refusal on the way does not spoil the transaction either.
        expect(await codeOf(() => inTx.triggerJob({ id: jobId! }))).toBe('CONFLICT');
        throw new Error('the application changed its mind');
      }),
    ).rejects.toThrow(/changed its mind/);
    expect(jobId).toBeDefined();
    expect(await counts()).toEqual(before);
  });

  it('commits with the caller: triggerJob in the transaction adds the execution only at commit', async () => {
    const { job } = await gate.client.createJob({
      endpointName: 'shop.ship',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3600_000),
      name: 'tx-trigger',
      input: { order: 'o-trigger' },
    });
    await t.db.transaction().execute(async (trx) => {
      const { execution } = await gate.inTransaction(trx).triggerJob({ id: job.id, force: true });
      expect((await t.query('select count(*)::int as n from executions where id = $1', [execution.id])).rows[0].n).toBe(0);
    });
    await eventually(async () => ran.includes('o-trigger'), 20_000, 'the triggered execution to run');
  });

  it('refuses the Kysely instance itself, which is not one connection', async () => {
    expect(() => gate.inTransaction(t.db)).toThrow(/Transaction/);
  });
});

/**
 * createJob's rules are written twice: in TypeScript (the full path, src/service/jobs/create.ts)
 * and in one SQL statement (src/db/statements/create-job.ts), which restates the ones it needs for
 * speed. This test pins the two together over every combination the statement can be asked:
 * whatever it inserts, the full path inserts identically; whatever the full path refuses, it
 * declines (inserting nothing), so the full path raises the error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertJobsInOneStatement } from '../../src/db/statements/create-job.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createContext, type ServiceContext } from '../../src/service/kernel/context.js';
import { DomainError } from '../../src/service/kernel/errors.js';
import { createJobIn, oneStatementJob } from '../../src/service/jobs/create.js';
import type { CreateJobInput } from '../../src/service/kernel/inputs.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let ctx: ServiceContext;
const endpoints: Record<string, string> = {};

beforeAll(async () => {
  t = await createTestDb();
  ctx = createContext({ db: t.db, pool: t.database.pool, defaultMaxAttempts: 5 });
  const spec = await t.service.createPayloadSpec(t.actor, { name: 'paths.spec', jsonSchema: { type: 'object' } });
  const register = async (name: string, extra: Record<string, unknown> = {}) =>
    (endpoints[name] = (await t.service.registerEndpoint(t.actor, { name, kind: 'HANDLER', handlerName: 'noop', ...extra })).id);
  await register('paths.plain');
  await register('paths.capped', { maxAttempts: 7 });
  // Its executions are gated (claimed under its limits): the statement gives the flag itself (migration 000057).
  await register('paths.limited', { rateLimit: { count: 10, periodMs: 1000 } });
  await register('paths.specced', { payloadSpecId: spec.id });
  await t.service.archiveEndpoint(t.actor, await register('paths.archived'));
  endpoints['jobgate.alerts'] = (
    await t.query(`select id from endpoints where name = 'jobgate.alerts' and workspace_id = $1`, [t.actor.workspaceId])
  ).rows[0].id;
});
afterAll(() => t.close());

const JOB_VOLATILE = ['id', 'created_at', 'updated_at'];
const EXECUTION_VOLATILE = ['id', 'job_id', 'created_at', 'updated_at'];
const rowOf = async (table: string, column: string, id: string, volatile: string[], immediate: boolean) => {
  const row = (await t.query(`select * from ${table} where ${column} = $1`, [id])).rows[0];
  // An IMMEDIATE execution is due at its transaction's now(): a different instant on each path.
  for (const c of [...volatile, ...(immediate ? ['scheduled_for', 'run_after'] : [])]) delete row[c];
  return row;
};

/** What the full path does with the request, in a transaction rolled back unless asked to keep it. */
async function fullPath(actor: Actor, raw: CreateJobInput): Promise<{ jobId: string } | { code: string }> {
  try {
    const { job } = await t.db.transaction().execute((trx) => createJobIn(ctx, trx, actor, raw));
    return { jobId: job.id };
  } catch (error) {
    if (error instanceof DomainError) return { code: error.code };
    throw error;
  }
}

const actors = (): Record<string, Actor> => ({ user: t.actor, system: t.systemActor });
const cases: { endpoint: string; by: 'id' | 'name'; kind: 'IMMEDIATE' | 'DELAYED'; maxAttempts?: number; actor: 'user' | 'system' }[] = [];
for (const endpoint of [
  'paths.plain',
  'paths.capped',
  'paths.limited',
  'paths.specced',
  'paths.archived',
  'jobgate.alerts',
  'paths.missing',
])
  for (const by of ['id', 'name'] as const)
    for (const kind of ['IMMEDIATE', 'DELAYED'] as const)
      for (const maxAttempts of [undefined, 3])
        for (const actor of ['user', 'system'] as const) cases.push({ endpoint, by, kind, maxAttempts, actor });

describe('createJob in one statement and on the full path', () => {
  it('inserts the same rows for every request the statement takes, and declines every request the full path refuses', async () => {
    let taken = 0;
    let declined = 0;
    for (const c of cases) {
      const actor = actors()[c.actor]!;
      const endpointRef =
        c.by === 'name' ? { endpointName: c.endpoint } : { endpointId: endpoints[c.endpoint] ?? '00000000-0000-4000-8000-000000000000' };
      const raw: CreateJobInput = {
        ...endpointRef,
        kind: c.kind,
        name: `case ${JSON.stringify(c)}`,
        input: { n: 1, nested: { a: [1, 2] } },
        ...(c.kind === 'DELAYED' ? { runAt: new Date(Date.now() + 3_600_000) } : {}),
        ...(c.maxAttempts ? { maxAttempts: c.maxAttempts } : {}),
      };
      const asked = oneStatementJob(ctx, actor, raw);
      expect(asked, JSON.stringify(c)).toBeDefined();
      const [quick] = await insertJobsInOneStatement(t.db, t.database.pool, [asked!]);
      const full = await fullPath(actor, raw);
      const what = `${JSON.stringify(c)}: statement ${quick ? 'inserted' : 'declined'}, full path ${JSON.stringify(full)}`;
      if (quick) {
        taken++;
        expect('jobId' in full, what).toBe(true);
        const fullId = (full as { jobId: string }).jobId;
        const immediate = c.kind === 'IMMEDIATE';
        expect(await rowOf('jobs', 'id', quick.id, JOB_VOLATILE, false), what).toEqual(
          await rowOf('jobs', 'id', fullId, JOB_VOLATILE, false),
        );
        expect(await rowOf('executions', 'job_id', quick.id, EXECUTION_VOLATILE, immediate), what).toEqual(
          await rowOf('executions', 'job_id', fullId, EXECUTION_VOLATILE, immediate),
        );
      } else {
        declined++;
        // Declined: either the full path refuses it, or it needs what only the full path checks (a payload spec).
        if ('jobId' in full) expect(c.endpoint, what).toBe('paths.specced');
        expect(
          (await t.query(`select count(*)::int as n from jobs where name = $1 and idempotency_key is null`, [raw.name])).rows[0].n,
          what,
        ).toBe('jobId' in full ? 1 : 0);
      }
    }
    // Both outcomes were exercised, and both gate flags' values.
    expect(taken).toBeGreaterThan(0);
    const flags = await t.query(
      `select distinct e.gated, e.job_held from executions e join jobs j on j.id = e.job_id where j.name like 'case %'`,
    );
    expect(flags.rows.map((r) => r.gated).sort()).toEqual([false, true]);
    expect(declined).toBeGreaterThan(0);
  });

  it('adds a member only to an open batch of the workspace, counted, as the full path does', async () => {
    const open = (await t.service.createBatch(t.actor, { open: true })).batch.id;
    const closed = (await t.service.createBatch(t.actor, {})).batch.id;
    const theirs = (await t.service.createBatch(t.otherActor, { open: true })).batch.id;
    const total = async (id: string) => (await t.query(`select total from batches where id = $1`, [id])).rows[0].total;
    const batches = { open, closed, theirs, missing: '00000000-0000-4000-8000-000000000000' };
    for (const [which, batchId] of Object.entries(batches)) {
      const raw: CreateJobInput = { endpointName: 'paths.plain', kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000), batchId };
      const asked = oneStatementJob(ctx, t.actor, raw);
      expect(asked, which).toBeDefined();
      const [quick] = await insertJobsInOneStatement(t.db, t.database.pool, [asked!]);
      const full = await fullPath(t.actor, raw);
      expect(quick !== undefined, which).toBe(which === 'open');
      expect('jobId' in full ? 'CREATED' : full.code, which).toBe(
        { open: 'CREATED', closed: 'CONFLICT', theirs: 'NOT_FOUND', missing: 'NOT_FOUND' }[which],
      );
      if (!quick) continue;
      const fullId = (full as { jobId: string }).jobId;
      expect(await rowOf('jobs', 'id', quick.id, JOB_VOLATILE, false)).toEqual(await rowOf('jobs', 'id', fullId, JOB_VOLATILE, false));
      expect(await rowOf('executions', 'job_id', quick.id, EXECUTION_VOLATILE, false)).toEqual(
        await rowOf('executions', 'job_id', fullId, EXECUTION_VOLATILE, false),
      );
      expect((await t.query(`select has_dependents from executions where job_id = $1`, [quick.id])).rows[0].has_dependents).toBe(true);
    }
    expect([await total(open), await total(closed), await total(theirs)]).toEqual([2, 0, 0]);
  });

  it('declines a member of a batch another transaction holds, and writes the other requests of the statement without waiting', async () => {
    const held = (await t.service.createBatch(t.actor, { open: true })).batch.id;
    const holder = await t.database.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select 1 from batches where id = $1 for update`, [held]);
      const plain: CreateJobInput = { endpointName: 'paths.plain', kind: 'IMMEDIATE', name: 'beside a held batch' };
      const rows = await insertJobsInOneStatement(
        t.db,
        t.database.pool,
        [plain, { ...plain, name: 'into a held batch', batchId: held }].map((r) => oneStatementJob(ctx, t.actor, r)!),
      );
      expect(rows.map((r) => r?.name ?? null)).toEqual(['beside a held batch', null]);
    } finally {
      await holder.query('rollback');
      holder.release();
    }
  });

  it('writes many requests in one statement as it writes each alone, declining only the ones a rule sends to the full path', async () => {
    const ok = (i: number): CreateJobInput => ({ endpointName: 'paths.plain', kind: 'IMMEDIATE', name: `batch ${i}`, input: { i } });
    const requests = [
      ok(1),
      { endpointName: 'paths.archived', kind: 'IMMEDIATE' as const },
      ok(2),
      { endpointName: 'paths.specced', kind: 'IMMEDIATE' as const },
      ok(3),
    ];
    const rows = await insertJobsInOneStatement(
      t.db,
      t.database.pool,
      requests.map((r) => oneStatementJob(ctx, t.actor, r)!),
    );
    expect(rows.map((r) => r?.name ?? null)).toEqual(['batch 1', null, 'batch 2', null, 'batch 3']);
    for (const row of rows.filter((r) => r)) {
      const { rows: audit } = await t.query(`select result_code, input from audit_log where target_id = $1`, [row!.id]);
      expect(audit).toEqual([{ result_code: 'OK', input: expect.objectContaining({ name: row!.name }) }]);
      expect((await t.query(`select count(*)::int as n from executions where job_id = $1`, [row!.id])).rows[0].n).toBe(1);
    }
  });
});

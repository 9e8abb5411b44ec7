/**
 * Jobs and executions get ids that grow with time (UUID version 7, migration 000058), whichever
 * path writes them: createJob's one statement, its full path, createJobs, a trigger of a cron job
 * (an insert that takes the table's default, as the scheduler's does), a plain insert. The ids of
 * rows made before the migration stay as they were.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { createEmptyDatabase, createTestDb, type TestDb } from '../support/db.js';

/** The millisecond a version 7 id was made at, or undefined when `id` is not one. */
function madeAt(id: string): number | undefined {
  const hex = id.replaceAll('-', '');
  if (hex.length !== 32 || hex[12] !== '7' || !'89ab'.includes(hex[16]!)) return undefined;
  return parseInt(hex.slice(0, 12), 16);
}

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
  await t.service.registerEndpoint(t.actor, { name: 'ids.target', kind: 'HANDLER', handlerName: 'absent' });
});
afterAll(() => t.close());

const dbNow = async () => Number((await t.query(`select floor(extract(epoch from clock_timestamp()) * 1000)::bigint as ms`)).rows[0].ms);
const executionIdsOf = async (jobId: string) =>
  (await t.query(`select id from executions where job_id = $1`, [jobId])).rows.map((r) => r.id as string);

describe('ids of jobs and executions', () => {
  it('are version 7, made at the database clock, by every path that creates them', async () => {
    const before = await dbNow();
    const quick = await t.service.createJob(t.actor, { endpointName: 'ids.target', kind: 'IMMEDIATE', input: {} });
    // An idempotency key takes the full path (several statements), not the one statement.
    const full = await t.service.createJob(t.actor, { endpointName: 'ids.target', kind: 'IMMEDIATE', input: {}, idempotencyKey: 'k-1' });
    const many = await t.service.createJobs(t.actor, [
      { endpointName: 'ids.target', kind: 'IMMEDIATE', input: { n: 1 } },
      { endpointName: 'ids.target', kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000).toISOString(), input: { n: 2 } },
    ]);
    const cron = await t.service.createJob(t.actor, {
      endpointName: 'ids.target',
      kind: 'CRON',
      cron: { expression: '0 0 1 1 *' },
      input: {},
    });
    // A cron job's execution is written by the scheduler or a trigger, by a plain insert.
    const triggered = await t.service.triggerJob(t.actor, { id: cron.job.id });
    const after = await dbNow();

    const jobs = [quick.job.id, full.job.id, ...many.map((r) => r.job.id), cron.job.id];
    const executions = (await Promise.all(jobs.map(executionIdsOf))).flat();
    expect(executions).toContain(triggered.execution.id);
    // Every job has its first execution: the one-off jobs theirs, the cron job the triggered one.
    expect(executions).toHaveLength(jobs.length);
    for (const id of [...jobs, ...executions]) {
      const ms = madeAt(id);
      expect(ms, `${id} is a version 7 id`).toBeDefined();
      expect(ms!).toBeGreaterThanOrEqual(before);
      expect(ms!).toBeLessThanOrEqual(after);
    }
  });

  it('sort by when they were made', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await t.service.createJob(t.actor, { endpointName: 'ids.target', kind: 'IMMEDIATE', input: { i } })).job.id);
      await new Promise((r) => setTimeout(r, 3));
    }
    expect([...ids].sort()).toEqual(ids);
    const { rows } = await t.query(`select id::text from jobs where id = any($1::uuid[]) order by id`, [ids]);
    expect(rows.map((r) => r.id)).toEqual(ids);
  });
});

describe('000058 on a database filled by the release before it', () => {
  it('keeps the ids rows had, and gives new rows version 7 ids', async () => {
    const db = await createEmptyDatabase();
    const client = new pg.Client({ connectionString: db.url });
    try {
      // The release before: every migration up to 000057. jobgate_uuid_v7 does not exist yet.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-ids-'));
      const files = fs.readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{6}_.*\.sql$/.test(f));
      for (const f of files.filter((f) => Number(f.slice(0, 6)) < 58)) fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
      await migrate(db.url, { dir });
      await client.connect();
      const q = async (text: string, values: unknown[] = []) => (await client.query(text, values)).rows;
      const [ws] = await q(`select id from workspaces where slug = 'default'`);
      const [endpoint] = await q(
        `insert into endpoints (workspace_id, name, kind, handler_name) values ($1, 'up.ids', 'HANDLER', 'h') returning id`,
        [ws.id],
      );
      const insertJob = async () => {
        const [job] = await q(
          `insert into jobs (workspace_id, endpoint_id, kind, max_attempts) values ($1, $2, 'IMMEDIATE', 1) returning id`,
          [ws.id, endpoint.id],
        );
        const [execution] = await q(
          `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
           values ($1, $2, $3, now(), now(), 1) returning id`,
          [ws.id, job.id, endpoint.id],
        );
        return [job.id as string, execution.id as string];
      };
      const old = await insertJob();
      for (const id of old) expect(madeAt(id)).toBeUndefined();

      for (const f of files.filter((f) => Number(f.slice(0, 6)) >= 58)) fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
      expect((await migrate(db.url, { dir })).applied).toContain('000058_time_ordered_ids.sql');
      fs.rmSync(dir, { recursive: true, force: true });

      expect(await q(`select count(*)::int as n from jobs where id = $1`, [old[0]])).toEqual([{ n: 1 }]);
      expect(await q(`select count(*)::int as n from executions where id = $1`, [old[1]])).toEqual([{ n: 1 }]);
      for (const id of await insertJob()) expect(madeAt(id)).toBeDefined();
    } finally {
      await client.end().catch(() => {});
      await db.drop();
    }
  });
});

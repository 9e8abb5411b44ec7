/**
 * Migrations that move data, applied to a database filled by the release before them: the data
 * arrives where the new schema keeps it, and the engine's rules hold on it afterwards.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { createEmptyDatabase } from '../support/db.js';
import { madeAt } from '../support/ids.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A database migrated by the real files before `version` only, and a way to apply the rest. */
async function databaseBefore(version: number) {
  const db = await createEmptyDatabase();
  cleanups.push(() => db.drop());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-upgrade-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = fs.readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{6}_.*\.sql$/.test(f));
  for (const f of files.filter((f) => Number(f.slice(0, 6)) < version)) fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
  await migrate(db.url, { dir });
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  cleanups.push(() => client.end());
  return {
    client,
    async upgrade() {
      for (const f of files.filter((f) => Number(f.slice(0, 6)) >= version))
        fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
      return migrate(db.url, { dir });
    },
  };
}

describe('000051: a batch member is counted on its execution', () => {
  it('carries counted members over from their jobs, and counts the rest once as they end', async () => {
    const { client, upgrade } = await databaseBefore(51);
    const q = async (text: string, values: unknown[] = []) => (await client.query(text, values)).rows;
    const [ws] = await q(`select id from workspaces where slug = 'default'`);
    const [endpoint] = await q(
      `insert into endpoints (workspace_id, name, kind, handler_name) values ($1, 'up.part', 'HANDLER', 'part') returning id`,
      [ws.id],
    );
    const [batch] = await q(`insert into batches (workspace_id, open) values ($1, false) returning id`, [ws.id]);
    const member = async () => {
      const [job] = await q(
        `insert into jobs (workspace_id, endpoint_id, kind, max_attempts, batch_id) values ($1, $2, 'IMMEDIATE', 1, $3) returning id`,
        [ws.id, endpoint.id, batch.id],
      );
      await q(
        `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, has_dependents)
         values ($1, $2, $3, now(), now(), 1, true)`,
        [ws.id, job.id, endpoint.id],
      );
      await q(`update batches set total = total + 1 where id = $1`, [batch.id]);
      return job.id as string;
    };
    const ended = await member();
    const pending = await member();
    // Counted under 000048: the mark on the job.
    await q(`update executions set status = 'FAILED', finished_at = now() where job_id = $1`, [ended]);
    expect(await q(`select batch_outcome from jobs where id = $1`, [ended])).toEqual([{ batch_outcome: 'FAILED' }]);
    expect(await q(`select failed, completed_at from batches where id = $1`, [batch.id])).toEqual([{ failed: 1, completed_at: null }]);

    expect((await upgrade()).applied).toContain('000051_batch_outcome_on_execution.sql');
    expect(await q(`select batch_outcome from executions where job_id = $1`, [ended])).toEqual([{ batch_outcome: 'FAILED' }]);
    expect(await q(`select batch_outcome from executions where job_id = $1`, [pending])).toEqual([{ batch_outcome: null }]);

    // The member counted before is not counted again when re-driven and ended; the other counts once and completes the batch.
    // (jobs.batch_outcome stays, unused, for gateways of the previous version during the upgrade.)
    await q(`update executions set status = 'PENDING', finished_at = null where job_id = $1`, [ended]);
    await q(`update executions set status = 'SUCCEEDED', finished_at = now() where job_id = $1`, [ended]);
    await q(`update executions set status = 'SUCCEEDED', finished_at = now() where job_id = $1`, [pending]);
    const [after] = await q(`select total, succeeded, failed, completed_at is not null as completed from batches where id = $1`, [
      batch.id,
    ]);
    expect(after).toEqual({ total: 2, succeeded: 1, failed: 1, completed: true });
    expect(await q(`select batch_outcome from jobs where id = $1`, [pending])).toEqual([{ batch_outcome: null }]);
  });
});

describe('000058: jobs and executions get ids that grow with time', () => {
  it('keeps the ids rows had, and gives new rows version 7 ids', async () => {
    const { client, upgrade } = await databaseBefore(58);
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

    expect((await upgrade()).applied).toContain('000058_time_ordered_ids.sql');

    expect(await q(`select count(*)::int as n from jobs where id = $1`, [old[0]])).toEqual([{ n: 1 }]);
    expect(await q(`select count(*)::int as n from executions where id = $1`, [old[1]])).toEqual([{ n: 1 }]);
    for (const id of await insertJob()) expect(madeAt(id)).toBeDefined();
  });
});

describe('000062: live events are kept by generation', () => {
  it('keeps the events there were, with their ids, as generation 0, and goes on numbering after them', async () => {
    const { client, upgrade } = await databaseBefore(62);
    const q = async (text: string, values: unknown[] = []) => (await client.query(text, values)).rows;
    const [ws] = await q(`select id from workspaces where slug = 'default'`);
    await q(
      `insert into events (workspace_id, topic, subject_id, status, created_at)
       select $1, 'JOB', gen_random_uuid(), 'ACTIVE', now() - make_interval(hours => g) from generate_series(1, 50) g`,
      [ws.id],
    );
    const before = await q(`select id, subject_id, created_at from events order by id`);
    await q(`update workspaces set events_pruned_through = $1 where id = $2`, [before[0].id, ws.id]);

    expect((await upgrade()).applied).toContain('000062_events_partitioned_by_generation.sql');

    expect(await q(`select id, subject_id, created_at from events order by id`)).toEqual(before);
    expect(new Set((await q(`select tableoid::regclass::text as p from events`)).map((r) => r.p))).toEqual(new Set(['events_g0']));
    const [made] = await q(
      `insert into events (workspace_id, topic, subject_id, status) values ($1, 'JOB', gen_random_uuid(), 'ACTIVE') returning id, gen`,
      [ws.id],
    );
    expect(Number(made.id)).toBe(Math.max(...before.map((r) => Number(r.id))) + 1);
    expect(made.gen).toBe(0);
    // The replay's index adopted as it was (not built again), and the horizon as it was.
    expect(
      await q(
        `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
         where i.inhparent = 'events_replay'::regclass and c.relname like 'events_g0%'`,
      ),
    ).toEqual([{ name: 'events_g0_replay' }]);
    expect(await q(`select events_pruned_through::int as h from workspaces where id = $1`, [ws.id])).toEqual([{ h: Number(before[0].id) }]);
  });
});

describe('000064: config secrets say which key wrote them', () => {
  it("credits each config's secrets to the key of its latest accepted config.set, and leaves configs without one as they were", async () => {
    const { client, upgrade } = await databaseBefore(64);
    const q = async (text: string, values: unknown[] = []) => (await client.query(text, values)).rows;
    const [ws] = await q(`select id from workspaces where slug = 'default'`);
    const key = async (name: string, role: string) =>
      (
        await q(`insert into api_keys (workspace_id, name, prefix, key_hash, role) values ($1, $2, $2, $3, $4) returning id`, [
          ws.id,
          name,
          Buffer.from(name),
          role,
        ])
      )[0].id as string;
    const operator = await key('op', 'OPERATOR');
    const admin = await key('admin', 'ADMIN');
    const config = async (name: string, entries: object) =>
      (
        await q(`insert into configs (workspace_id, name, entries, created_by_key_id) values ($1, $2, $3, $4) returning id`, [
          ws.id,
          name,
          JSON.stringify(entries),
          operator,
        ])
      )[0].id as string;
    const audit = (configId: string, keyId: string | null, code = 'OK') =>
      q(
        `insert into audit_log (workspace_id, actor_kind, actor_key_id, action, target_type, target_id, input, result_code)
         values ($1, 'user', $2, 'config.set', 'Config', $3, '{}', $4)`,
        [ws.id, keyId, configId, code],
      );
    // An operator's config into which an ADMIN wrote a secret last; a refused try after it does not count.
    const adminWrote = await config('up.admin', { token: { value: 'sealed', secret: true }, region: { value: 'eu', secret: false } });
    await audit(adminWrote, operator);
    await audit(adminWrote, admin);
    await audit(adminWrote, operator, 'FORBIDDEN');
    const noAudit = await config('up.pruned', { token: { value: 'sealed', secret: true } });
    const library = await config('up.library', { token: { value: 'sealed', secret: true } });
    await audit(library, null);
    await upgrade();
    const entries = async (id: string) => (await q(`select entries from configs where id = $1`, [id]))[0].entries;
    expect(await entries(adminWrote)).toEqual({
      token: { value: 'sealed', secret: true, setBy: admin },
      region: { value: 'eu', secret: false },
    });
    expect(await entries(noAudit)).toEqual({ token: { value: 'sealed', secret: true } });
    expect(await entries(library)).toEqual({ token: { value: 'sealed', secret: true, setBy: null } });
  });
});

describe('000065: endpoints say which key aimed them', () => {
  it("takes each endpoint's creator as the key that aimed it", async () => {
    const { client, upgrade } = await databaseBefore(65);
    const q = async (text: string, values: unknown[] = []) => (await client.query(text, values)).rows;
    const [ws] = await q(`select id from workspaces where slug = 'default'`);
    const [key] = await q(
      `insert into api_keys (workspace_id, name, prefix, key_hash, role) values ($1, 'op', 'op', 'x', 'OPERATOR') returning id`,
      [ws.id],
    );
    await q(
      `insert into endpoints (workspace_id, name, kind, url, method, created_by_key_id) values ($1, 'up.keyed', 'HTTP', 'https://x.example/', 'POST', $2)`,
      [ws.id, key.id],
    );
    await q(`insert into endpoints (workspace_id, name, kind, handler_name) values ($1, 'up.keyless', 'HANDLER', 'h')`, [ws.id]);
    await upgrade();
    expect(await q(`select name, aimed_by_key_id from endpoints where name like 'up.%' order by name`)).toEqual([
      { name: 'up.keyed', aimed_by_key_id: key.id },
      { name: 'up.keyless', aimed_by_key_id: null },
    ]);
  });
});

/**
 * A job's live executions are read among the live ones, not through the job's history (migration
 * 000053): the cron scheduler asks it of every due job (overlap SKIP), the claim of every serial
 * occurrence (overlap QUEUE). A cron job keeps an execution per occurrence, so reading its history
 * cost each question as many rows as the job had ever run.
 *
 * Each test reads the plans Postgres ran (auto_explain on the connections of a pool of its own)
 * and counts the executions rows each plan node read, kept or filtered out.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimExecutions } from '../../src/db/statements/claim.js';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { pauseOwnCronJobs } from '../support/engine.js';
import { ownPool } from '../support/own-pool.js';

const HISTORY = 100;
const JOBS = 20;
/** Live executions of another job on the same endpoint: the endpoint's live set is not small. */
const BACKLOG = 3_000;

let t: TestDb;
let endpointId: string;
let explained: pg.Pool;
let plans: string[];

beforeEach(async () => {
  t = await createTestDb();
  await pauseOwnCronJobs(t);
  endpointId = (await t.service.registerEndpoint(t.actor, { name: 'live.lookup', kind: 'HANDLER', handlerName: 'live.h' })).id;
  plans = [];
  explained = ownPool({ connectionString: t.url, max: 2 });
  explained.on('connect', (client) => {
    client.on('notice', (n) => plans.push(n.message ?? ''));
    void client.query(
      `load 'auto_explain'; set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on;
       set auto_explain.log_format = json; set auto_explain.log_level = notice; set auto_explain.log_nested_statements = on`,
    );
  });
});
afterEach(async () => {
  await explained.end();
  await t.close();
});

/** `n` cron jobs (overlap `overlap`) due a second ago, each with HISTORY ended executions. */
async function cronJobsWithHistory(n: number, overlap: 'SKIP' | 'QUEUE'): Promise<string[]> {
  const { rows } = await t.query<{ id: string }>(
    `insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts, cron_expression, timezone, misfire_policy, overlap_policy, next_fire_at)
     select $1, $2, 'CRON', '{}', 1, '* * * * *', 'UTC', 'FIRE_LATEST', $4, now() - interval '1 second' from generate_series(1, $3::int)
     returning id`,
    [t.actor.workspaceId, endpointId, n, overlap],
  );
  await t.query(
    `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, status, attempt_count, finished_at)
     select j.workspace_id, j.id, j.endpoint_id, now() - g * interval '1 minute', now() - g * interval '1 minute', 1, 'SUCCEEDED', 1,
            now() - g * interval '1 minute'
     from jobs j cross join generate_series(1, $2::int) g where j.id = any($1::uuid[])`,
    [rows.map((r) => r.id), HISTORY],
  );
  return rows.map((r) => r.id);
}

/** BACKLOG pending executions of one delayed job on the endpoint, due tomorrow. */
async function backlog(): Promise<void> {
  await t.query(
    `with j as (insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts, run_at)
                values ($1, $2, 'DELAYED', '{}', 1, now() + interval '1 day') returning id, workspace_id, endpoint_id)
     insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
     select j.workspace_id, j.id, j.endpoint_id, now() + g * interval '1 second', now() + interval '1 day', 1 from j, generate_series(1, $3::int) g`,
    [t.actor.workspaceId, endpointId, BACKLOG],
  );
}

/** Rows of `executions` each scan node of the plans matching `query` read (kept or filtered), by alias. */
function executionsRead(query: RegExp): Map<string, number> {
  const read = new Map<string, number>();
  const walk = (node: Record<string, any>) => {
    if (node['Relation Name'] === 'executions' && /Scan/.test(node['Node Type'])) {
      const rows = (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'];
      read.set(node.Alias, (read.get(node.Alias) ?? 0) + rows);
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  for (const message of plans) {
    const json = JSON.parse(message.replace(/^duration: [\d.]+ ms\s+plan:\s*/, ''));
    if (query.test(json['Query Text'])) walk(json.Plan);
  }
  return read;
}

describe("a job's live executions", () => {
  it("the scheduler reads each due job's live executions, not its history, and still skips the job whose previous one runs", async () => {
    const jobs = await cronJobsWithHistory(JOBS, 'SKIP');
    await backlog();
    // One job's previous occurrence still runs: SKIP fires nothing for it.
    await t.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, status, attempt_count, attempt_started_at)
       values ($1, $2, $3, now() - interval '30 seconds', now() - interval '30 seconds', 1, 'RUNNING', 1, now())`,
      [t.actor.workspaceId, jobs[0], endpointId],
    );
    await t.query('analyze executions, jobs');

    const scheduler = createCronJobScheduler({ pool: explained, log: createLogger('silent') });
    const result = await scheduler.tick();
    expect(result).toMatchObject({ fired: JOBS - 1, skipped: 1, jobs: JOBS });

    const read = executionsRead(/left join lateral/);
    expect(read.size).toBeGreaterThan(0);
    // The live lookup's rows: the one running execution, not JOBS × HISTORY (nor the backlog per job).
    for (const [alias, rows] of read) expect(rows, `rows of executions read as ${alias}`).toBeLessThanOrEqual(JOBS);
  });

  it("the claim's serial turn reads the job's live executions, not its history", async () => {
    const [job] = await cronJobsWithHistory(1, 'QUEUE');
    await backlog();
    // The job's due occurrence, serial as the scheduler writes a QUEUE job's.
    await t.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, serial)
       values ($1, $2, $3, now() - interval '1 second', now() - interval '1 second', 1, true)`,
      [t.actor.workspaceId, job, endpointId],
    );
    await t.query('analyze executions, jobs');

    const claimed = await claimExecutions(explained, {
      workerId: 'w',
      leaseMs: 60_000,
      handlers: ['live.h'],
      limit: 10,
      limitedEndpoints: false,
    });
    expect(claimed.map((c) => c.job_id)).toEqual([job]);

    const read = executionsRead(/with recursive levels/);
    // The serial turn's two questions: is one of the job's running, is an earlier one pending.
    for (const alias of ['r', 'p']) expect(read.get(alias) ?? 0, `rows of executions read as ${alias}`).toBeLessThanOrEqual(2);
  });
});

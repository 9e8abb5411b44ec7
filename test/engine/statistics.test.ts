/**
 * The claim on tables whose statistics lag behind them (src/db/statements/statistics.ts and the
 * unlimited claim in src/db/statements/claim.ts): a worker analyzes the claim's tables once they outgrow their
 * statistics, and on analyzed tables a claim reads its executions in the due index's order,
 * stopped by its limit, instead of every pending execution of each endpoint.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimExecutions } from '../../src/db/statements/claim.js';
import { analyzeGrownTables, GROWTH_FLOOR } from '../../src/db/statements/statistics.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, type EngineHarness } from '../support/engine.js';
import { eventually } from '../support/eventually.js';
import { ownPool } from '../support/own-pool.js';

let t: TestDb;
let h: EngineHarness;

beforeEach(async () => {
  t = await createTestDb();
  h = engineHarness(t);
});
afterEach(async () => {
  await h.stopAll();
  await t.close();
});

/** `n` pending executions due now on `endpoint`, written as createJob would, in one statement each. */
async function pending(endpointId: string, n: number) {
  await t.query(
    `with j as (insert into jobs (workspace_id, endpoint_id, kind, input, max_attempts)
                select $1, $2, 'IMMEDIATE', '{}', 1 from generate_series(1, $3::int) returning id, workspace_id, endpoint_id)
     insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts)
     select workspace_id, id, endpoint_id, now(), now() - interval '1 minute', 1 from j`,
    [t.actor.workspaceId, endpointId, n],
  );
}

const lastAnalyzed = async (table: string): Promise<Date | null> =>
  (await t.query(`select last_analyze from pg_stat_user_tables where relid = to_regclass($1)`, [table])).rows[0]?.last_analyze ?? null;

describe('statistics of the claimed tables', () => {
  it('a worker analyzes executions and jobs once they grow past twice their statistics, and leaves the others alone', async () => {
    const e = await t.service.registerEndpoint(t.actor, { name: 'stats.e', kind: 'HANDLER', handlerName: 'nobody-runs-this' });
    await t.query('analyze executions, jobs, endpoints');
    // Each table's own: one ANALYZE of three reaches jobs a little after executions, so the time
    // executions was analyzed said jobs had been analyzed again before the worker had.
    const [executionsBefore, jobsBefore] = [await lastAnalyzed('executions'), await lastAnalyzed('jobs')];
    const endpointsBefore = await lastAnalyzed('endpoints');
    await pending(e.id, GROWTH_FLOOR + 500);

    await h.worker({ statisticsMs: 50 });
    await eventually(
      async () => {
        const [executions, jobs] = [await lastAnalyzed('executions'), await lastAnalyzed('jobs')];
        return executions && jobs && executions > executionsBefore! && jobs > jobsBefore!;
      },
      15_000,
      'the worker to analyze executions and jobs',
    );
    // Analyzed, their statistics are current: nothing is left to do, and endpoints never grew.
    expect(await analyzeGrownTables(t.database.pool)).toEqual([]);
    expect(await lastAnalyzed('endpoints')).toEqual(endpointsBefore);
  });

  it('a claim on analyzed tables reads no more executions than it claims, with the backlog on one endpoint', async () => {
    const e = await t.service.registerEndpoint(t.actor, { name: 'stats.busy', kind: 'HANDLER', handlerName: 'stats.h' });
    for (let i = 0; i < 3; i++)
      await t.service.registerEndpoint(t.actor, { name: `stats.quiet.${i}`, kind: 'HANDLER', handlerName: 'stats.h' });
    await pending(e.id, 5_000);
    await t.query('analyze executions, jobs, endpoints');

    // The rows each plan node produced, from the claim's own plan (auto_explain on this session).
    const client = await t.database.pool.connect();
    const release = client.release.bind(client);
    try {
      await client.query(`load 'auto_explain'`);
      await client.query(`set auto_explain.log_min_duration = 0`);
      await client.query(`set auto_explain.log_analyze = on`);
      await client.query(`set auto_explain.log_format = json`);
      await client.query(`set auto_explain.log_level = notice`);
      const plans: string[] = [];
      client.on('notice', (n) => plans.push(n.message ?? ''));
      // The claim takes its connection from a pool: this one, whose release keeps it for the test.
      const pool = { connect: async () => Object.assign(client, { release: () => {} }) } as unknown as typeof t.database.pool;
      // Past the first five runs of a prepared statement Postgres may switch to its generic plan,
      // planned without the handlers' names: claim ten times, and read every claim's plan.
      for (let i = 0; i < 10; i++) {
        const claimed = await claimExecutions(pool, {
          workerId: 'stats-w',
          leaseMs: 60_000,
          handlers: ['stats.h'],
          limit: 50,
          limitedEndpoints: false,
        });
        expect(claimed).toHaveLength(50);
      }
      const claims = plans.map((p) => p.replace(/^duration: [\d.]+ ms\s+plan:\s*/, '')).filter((p) => p.includes('with recursive levels'));
      expect(claims).toHaveLength(10);
      for (const plan of claims) {
        const scanned: number[] = [];
        const walk = (node: any) => {
          if (node['Relation Name'] === 'executions' && node['Alias'] === 'e' && /Scan/.test(node['Node Type']))
            scanned.push(node['Actual Rows'] * node['Actual Loops']);
          for (const child of node.Plans ?? []) walk(child);
        };
        walk(JSON.parse(plan).Plan);
        // The candidates' scan: 50 rows for 50 claimed (each level's walk stops at the limit).
        expect(scanned.length).toBeGreaterThan(0);
        expect(Math.max(...scanned)).toBeLessThanOrEqual(50);
      }
    } finally {
      release();
    }
  });
  it('a claim planned while jobs was small reads no job, however far jobs has grown since', async () => {
    const e = await t.service.registerEndpoint(t.actor, { name: 'stats.small', kind: 'HANDLER', handlerName: 'small.h' });
    await t.query('analyze executions, jobs, endpoints');
    // One connection, its claim planned once, generically, now (as a worker's prepared claim is
    // after a few runs), and read back with the plan Postgres ran.
    const plans: string[] = [];
    const explained = ownPool({ connectionString: t.url, max: 1 });
    explained.on('connect', (client) => {
      client.on('notice', (n) => plans.push(n.message ?? ''));
      void client.query(
        `set plan_cache_mode = force_generic_plan; load 'auto_explain'; set auto_explain.log_min_duration = 0;
         set auto_explain.log_analyze = on; set auto_explain.log_format = json; set auto_explain.log_level = notice`,
      );
    });
    try {
      const claim = () =>
        claimExecutions(explained, { workerId: 'w-small', limit: 50, handlers: ['small.h'], leaseMs: 30_000, limitedEndpoints: false });
      expect(await claim()).toHaveLength(0);
      // Then the burst, unanalyzed: 3,000 jobs and their executions.
      await pending(e.id, 3_000);
      plans.length = 0;
      expect(await claim()).toHaveLength(50);
      const read = plans.flatMap((p) => (p.includes('"Plan"') ? [JSON.parse(p.slice(p.indexOf('{')))] : [])).map(jobRowsRead);
      expect(read.length).toBeGreaterThan(0);
      expect(read.reduce((a, b) => a + b, 0)).toBe(0);
    } finally {
      await explained.end();
    }
  });
});

/** Rows of `jobs` a plan's nodes read (returned and filtered out, over all their loops). */
function jobRowsRead(explain: { Plan: Record<string, unknown> }): number {
  const walk = (node: Record<string, any>): number =>
    (node['Relation Name'] === 'jobs' ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] : 0) +
    ((node.Plans as Record<string, any>[] | undefined) ?? []).reduce((sum, child) => sum + walk(child), 0);
  return walk(explain.Plan);
}

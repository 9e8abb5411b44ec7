/**
 * List screens at a million executions: the latency of a page of each list a console shows,
 * through the real GraphQL gateway (yoga in process: parsing, validation, limits, resolvers,
 * service, SQL), the first page and the 50th (reached with its keyset cursor).
 *
 * Data, seeded in SQL with generate_series (triggers off for the seeding session, so the million
 * rows cost no event rows; an installation that made them one by one would have those too):
 * 100,000 jobs named job-000000 ... (10 endpoints), 1,000,000 executions over two months on the
 * oldest 1,000 jobs (1,000 each; 5% FAILED, 3% CANCELLED, the rest SUCCEEDED; every FAILED one
 * says "HTTP 500", one in 50 of them "HTTP 500: read timeout"), and 1,000,000 audit entries.
 * Then ANALYZE. BENCH_LISTS_EXECUTIONS seeds another number of executions over the same two
 * months and jobs (the counts above scale with it; the figures name it).
 *
 * Figures: p50 and p99 of `executions`, `executions(jobId)`, `executions(status: FAILED)`,
 * `jobs(filter: { search })`, a page of jobs each with its newest five executions, executions searched by job (1,000 matches: the sort) and by error text
 * (1,000 matches, through the trigram index; 50,000, the newest-first walk), and `auditLogConnection`, first page and 50th page, 20 items a page,
 * each timed ITERATIONS times in turn, and the gateway process's CPU per request. Wall-clock
 * figures on a machine shared with other work are mostly its queueing: read the plans
 * (EXPLAIN ANALYZE on the same data) before blaming a query.
 *
 * Then the bulk actions on the same data, each with 1,000 items in one call through the gateway
 * (ROUNDS times, on different jobs and executions each round; the median): pauseJobs and
 * resumeJobs on 1,000 jobs, pauseJobs on 1,000 copies of one id, retryExecutions on 1,000 FAILED
 * executions and cancelExecutions on the 1,000 it made PENDING (no worker runs). Also the audit
 * rows one 1,000-item call writes.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createLogger } from '../src/log.js';
import { createGatewayYoga } from '../src/server/gateway.js';
import type { Actor } from '../src/service/kernel/actor.js';
import { createJobService } from '../src/service/index.js';
import type { Figure } from './run.js';
import { openServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

const JOBS = 100_000;
/** BENCH_LISTS_EXECUTIONS: 10000000 shows the trend at ten times the history (seeding takes minutes). */
const EXECUTIONS = Number(process.env.BENCH_LISTS_EXECUTIONS ?? 1_000_000);
const AT = `${EXECUTIONS / 1_000_000}M executions`;
/** The seeded executions span the last 60 days, however many there are. */
const SPACING_MS = (60 * 86_400_000) / EXECUTIONS;
const BUSY_JOBS = 1_000;
const AUDIT = 1_000_000;
const ITERATIONS = 200;
const PAGE = 20;
const DEEP_PAGE = 50;
const BULK = 1_000;
const ROUNDS = 3;

export async function seed(url: string): Promise<{ workspaceId: string; busyJobId: string }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const t0 = performance.now();
    const ws = (await client.query(`select id from workspaces where slug = 'default'`)).rows[0].id as string;
    // Skips the event triggers (and foreign-key checks) of this session only: superuser needed;
    // without it, seeding still works, more slowly, with an event row per execution.
    await client
      .query(`set session_replication_role = replica`)
      .catch(() => process.stderr.write('bench lists: not a superuser; seeding with triggers on\n'));
    await client.query(
      `insert into endpoints (workspace_id, name, kind, handler_name)
       select $1, 'bench.list-' || i, 'HANDLER', 'noop' from generate_series(0, 9) i`,
      [ws],
    );
    await client.query(
      `insert into jobs (workspace_id, endpoint_id, name, kind, max_attempts, created_at, updated_at)
       select $1, (select id from endpoints where workspace_id = $1 and name = 'bench.list-' || (i % 10)),
              'job-' || lpad(i::text, 6, '0'), 'IMMEDIATE', 5,
              now() - interval '70 days' + i * interval '1 second', now() - interval '70 days' + i * interval '1 second'
       from generate_series(0, $2 - 1) i`,
      [ws, JOBS],
    );
    await client.query(
      `with busy as (
         select id, endpoint_id, (row_number() over (order by created_at, id) - 1)::int as n
         from jobs where workspace_id = $1 order by created_at, id limit $3)
       insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, status, attempt_count, max_attempts,
                               run_after, finished_at, last_error, input, created_at, updated_at, gated, job_held)
       select $1, b.id, b.endpoint_id, x.ts, x.status, 1, 5, x.ts, x.ts,
              case when x.status = 'FAILED' then 'HTTP 500' || case when g.i % 1000 = 7 then ': read timeout' else '' end end,
              '{}'::jsonb, x.ts, x.ts, false, false
       from generate_series(0, $2 - 1) g(i)
       join busy b on b.n = g.i % $3
       cross join lateral (
         select now() - interval '60 days' + g.i * make_interval(secs => $4 / 1000.0) as ts,
                case when g.i % 20 = 7 then 'FAILED' when g.i % 33 = 5 then 'CANCELLED' else 'SUCCEEDED' end as status) x`,
      [ws, EXECUTIONS, BUSY_JOBS, SPACING_MS],
    );
    await client.query(
      `insert into audit_log (workspace_id, actor_kind, action, target_type, target_id, input, result_code, created_at)
       select $1, 'user', (array['job.create', 'job.cancel', 'execution.retry', 'endpoint.update'])[1 + i % 4], 'Job',
              gen_random_uuid()::text, '{}'::jsonb, case when i % 50 = 0 then 'FORBIDDEN' else 'OK' end,
              now() - interval '60 days' + i * interval '5 seconds'
       from generate_series(0, $2 - 1) i`,
      [ws, AUDIT],
    );
    await client.query(`reset session_replication_role`);
    await client.query(`analyze`);
    const busyJobId = (await client.query(`select id from jobs where workspace_id = $1 and name = 'job-000000'`, [ws])).rows[0]
      .id as string;
    process.stderr.write(
      `bench lists: seeded ${JOBS} jobs, ${EXECUTIONS} executions, ${AUDIT} audit entries in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
    );
    return { workspaceId: ws, busyJobId };
  } finally {
    await client.end();
  }
}

interface ListQuery {
  name: string;
  query: string;
  variables: Record<string, unknown>;
  /** The connection in the answer's data. */
  connection: (data: any) => { edges: unknown[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } };
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_lists');
  try {
    await migrate(target.url);
    const { workspaceId, busyJobId } = await seed(target.url);
    const database = createDatabase({ connectionString: target.url, max: 4 });
    const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: 5 });
    const actor: Actor = { workspaceId, kind: 'user', role: 'ADMIN' };
    const yoga = createGatewayYoga({ service, log: createLogger('warn'), authenticate: async () => actor });
    const gql = async (query: string, variables: Record<string, unknown>) => {
      const res = await yoga.fetch('http://bench/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });
      const body = (await res.json()) as { data?: any; errors?: unknown[] };
      if (body.errors) throw new Error(`bench lists: ${JSON.stringify(body.errors)}`);
      return body.data;
    };
    const EXEC = `query ($first: Int, $after: String, $jobId: ID, $filter: ExecutionFilter) {
      executions(first: $first, after: $after, jobId: $jobId, filter: $filter) { edges { cursor node { id status createdAt attemptCount } } pageInfo { endCursor hasNextPage } }
    }`;
    const lists: ListQuery[] = [
      { name: 'executions', query: EXEC, variables: {}, connection: (d) => d.executions },
      { name: 'executions(jobId)', query: EXEC, variables: { jobId: busyJobId }, connection: (d) => d.executions },
      { name: 'executions(status: FAILED)', query: EXEC, variables: { filter: { statuses: ['FAILED'] } }, connection: (d) => d.executions },
      {
        name: 'jobs(search)',
        query: `query ($first: Int, $after: String, $search: String) {
          jobs(first: $first, after: $after, filter: { search: $search }) { edges { cursor node { id name status } } pageInfo { endCursor hasNextPage } }
        }`,
        // Matches job-001000 ... job-001999: 1,000 of the 100,000.
        variables: { search: 'JOB-001' },
        connection: (d) => d.jobs,
      },
      {
        // A page of jobs, each with its newest executions: one statement for every row's first page.
        name: 'jobs(search) with executions(first: 5)',
        query: `query ($first: Int, $after: String, $search: String) {
          jobs(first: $first, after: $after, filter: { search: $search }) {
            edges { cursor node { id name executions(first: 5) { nodes { id status createdAt } } } } pageInfo { endCursor hasNextPage }
          }
        }`,
        // Matches job-000000 ... job-000999: the 1,000 jobs that have executions, 1,000 each.
        variables: { search: 'JOB-000' },
        connection: (d) => d.jobs,
      },
      // The search of the Executions screen: each way a search runs (src/db/repositories/execution-list.ts).
      { name: 'executions(search: job)', query: EXEC, variables: { filter: { search: 'job-000000' } }, connection: (d) => d.executions },
      {
        name: 'executions(errorContains: few)',
        query: EXEC,
        variables: { filter: { errorContains: 'timeout' } },
        connection: (d) => d.executions,
      },
      {
        name: 'executions(errorContains: many)',
        query: EXEC,
        variables: { filter: { errorContains: 'http 500' } },
        connection: (d) => d.executions,
      },
      {
        name: 'auditLogConnection',
        query: `query ($first: Int, $after: String) {
          auditLogConnection(first: $first, after: $after) { edges { cursor node { id action resultCode createdAt } } pageInfo { endCursor hasNextPage } }
        }`,
        variables: {},
        connection: (d) => d.auditLogConnection,
      },
    ];
    const figures: Figure[] = [];
    for (const list of lists) {
      // The cursor that opens the 50th page: the end of the 49th.
      let after: string | null = null;
      for (let page = 1; page < DEEP_PAGE; page++) {
        const conn = list.connection(await gql(list.query, { ...list.variables, first: PAGE, after }));
        if (!conn.pageInfo.hasNextPage) throw new Error(`bench lists: ${list.name} has fewer than ${DEEP_PAGE} pages`);
        after = conn.pageInfo.endCursor;
      }
      for (const [label, cursor] of [
        ['page 1', null],
        [`page ${DEEP_PAGE}`, after],
      ] as const) {
        const variables = { ...list.variables, first: PAGE, after: cursor };
        for (let i = 0; i < 10; i++) await gql(list.query, variables); // warm-up
        const times: number[] = [];
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < ITERATIONS; i++) {
          const t0 = performance.now();
          const conn = list.connection(await gql(list.query, variables));
          times.push(performance.now() - t0);
          if (conn.edges.length !== PAGE) throw new Error(`bench lists: ${list.name} ${label} has ${conn.edges.length} items`);
        }
        const cpu = process.cpuUsage(cpu0);
        times.sort((a, b) => a - b);
        figures.push({
          bench: `lists at ${AT}: ${list.name} ${label} p50`,
          system: 'jobgate',
          value: quantile(times, 0.5),
          unit: 'ms',
        });
        figures.push({
          bench: `lists at ${AT}: ${list.name} ${label} p99`,
          system: 'jobgate',
          value: quantile(times, 0.99),
          unit: 'ms',
        });
        // The gateway's own CPU per request (yoga, resolvers, service, pg client), which a loaded
        // machine inflates far less than wall-clock latency; Postgres's time is not in it.
        figures.push({
          bench: `lists at ${AT}: ${list.name} ${label} gateway CPU`,
          system: 'jobgate',
          value: (cpu.user + cpu.system) / 1000 / ITERATIONS,
          unit: 'ms/request',
        });
      }
    }
    figures.push(...(await bulkFigures(gql, database.pool, workspaceId)));
    await database.close();
    return figures;
  } finally {
    await target.drop();
    await server.close();
  }
}

/** Milliseconds of `mutation`, one 1,000-item call, ROUNDS times; the median, and the audit rows of the last call. */
async function timeBulk(
  pool: pg.Pool,
  name: string,
  call: (round: number) => Promise<{ matched: number; changed: number }>,
  expected: { matched: number; changed: number },
): Promise<Figure[]> {
  const times: number[] = [];
  let audited = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const before = Number((await pool.query(`select count(*) as n from audit_log`)).rows[0].n);
    const t0 = performance.now();
    const result = await call(round);
    times.push(performance.now() - t0);
    // Said, not thrown: a build before duplicates collapsed answered 1,000 for one id.
    if (result.matched !== expected.matched || result.changed !== expected.changed) {
      process.stderr.write(`bench lists: ${name} answered ${JSON.stringify(result)}, not ${JSON.stringify(expected)}\n`);
    }
    audited = Number((await pool.query(`select count(*) as n from audit_log`)).rows[0].n) - before;
  }
  times.sort((a, b) => a - b);
  return [
    { bench: `bulk at ${AT}: ${name} (1,000 ids)`, system: 'jobgate', value: quantile(times, 0.5), unit: 'ms' },
    { bench: `bulk at ${AT}: ${name} audit rows`, system: 'jobgate', value: audited, unit: 'rows/call' },
  ];
}

async function bulkFigures(gql: (q: string, v: Record<string, unknown>) => Promise<any>, pool: pg.Pool, ws: string): Promise<Figure[]> {
  // Jobs job-010000 ... on: not the busy ones the lists page through.
  const { rows } = await pool.query<{ id: string }>(
    `select id from jobs where workspace_id = $1 and name >= 'job-010000' order by name limit $2`,
    [ws, BULK * ROUNDS],
  );
  const slice = (round: number) => rows.slice(round * BULK, (round + 1) * BULK).map((r) => r.id);
  const all = { matched: BULK, changed: BULK };
  const figures: Figure[] = [];
  const pause = `mutation ($ids: [ID!]!) { pauseJobs(ids: $ids) { matched changed } }`;
  const resume = `mutation ($ids: [ID!]!) { resumeJobs(ids: $ids) { matched changed } }`;
  figures.push(...(await timeBulk(pool, 'pauseJobs', async (r) => (await gql(pause, { ids: slice(r) })).pauseJobs, all)));
  figures.push(...(await timeBulk(pool, 'resumeJobs', async (r) => (await gql(resume, { ids: slice(r) })).resumeJobs, all)));
  // 1,000 copies of one id: one item.
  const copies = (r: number) => Array.from({ length: BULK }, () => slice(r)[0]!);
  const once = { matched: 1, changed: 1 };
  figures.push(
    ...(await timeBulk(pool, 'pauseJobs, one id 1,000 times', async (r) => (await gql(pause, { ids: copies(r) })).pauseJobs, once)),
  );
  const retry = `mutation { retryExecutions(filter: { statuses: [FAILED] }, limit: ${BULK}) { matched changed } }`;
  const cancel = `mutation { cancelExecutions(filter: { statuses: [PENDING] }, limit: ${BULK}) { matched changed } }`;
  figures.push(...(await timeBulk(pool, 'retryExecutions', async () => (await gql(retry, {})).retryExecutions, all)));
  // Each round cancels what one retry made PENDING: ROUNDS retries made 3,000.
  figures.push(...(await timeBulk(pool, 'cancelExecutions', async () => (await gql(cancel, {})).cancelExecutions, all)));
  return figures;
}

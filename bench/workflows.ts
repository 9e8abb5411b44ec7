/**
 * The workflows benchmark (docs/workflows.md): what batches and dependencies cost, through the
 * library's service as an application calls it, drained by real worker processes
 * (bench/workers/jobgate.ts, a no-op handler) on one fresh database.
 *
 *  - Creation: a batch of BATCH members (10,000) made as an application adds members while it
 *    finds them: `createBatch` with `open: true` and the first CALL (1,000), `createJobs` with
 *    `batchId` in calls of CALL, then `closeBatch`; the total and per 1,000 members (wall clock
 *    around the calls). Next to it, the same number of plain jobs made by the same `createJobs`
 *    calls without a batch.
 *  - Drain: the plain jobs (made and drained first), then the batch's members, each drained with
 *    nothing else waiting by PROCESSES fresh worker processes (CONCURRENCY attempts at once each,
 *    claims of CONCURRENCY, as bench/engine.ts): executions/s from the first attempt's start to the
 *    last one's end (database clock), their ratio (what counting each member into its batch costs
 *    the drain), the CPU each execution cost the database's backends and the workers
 *    (support/cpu.ts; only for a server on this host), and the longest time between two attempts
 *    starting (a stall shows there). BENCH_WORKFLOWS_DEBUG=1 prints the attempts started in each
 *    100 ms of each drain, by worker.
 *  - Fan-in: the time from a batch's last member ending (the latest `executions.finished_at` of its
 *    members) to its onComplete job's attempt starting (`attempts.started_at`), both on the
 *    database clock, for the BATCH batch and for REPEATS batches of REPEAT_SIZE members (500),
 *    each made closed by one `createBatch` and drained alone by the workers left running; p50,
 *    p99 and the most, over all of them.
 *  - Chains: CHAINS chains of CHAIN_LENGTH jobs, each depending on the one before (`dependsOn`),
 *    each chain created in one transaction (`gate.inTransaction`) so none is settled at its
 *    creation, one after the other with the workers running; for every edge, the time from the
 *    prerequisite's end to its dependent's attempt start (database clock), p50 and p99.
 *
 * The database clock is each transaction's `now()`: an end is stamped when its outcome transaction
 * begins, so every figure includes that transaction's own commit. Nothing is asserted, but a wrong
 * count is reported on stderr.
 *
 * env: BENCH_WORKFLOWS_BATCH (10000), BENCH_WORKFLOWS_CALL (1000), BENCH_WORKFLOWS_REPEATS (20),
 * BENCH_WORKFLOWS_REPEAT_SIZE (500), BENCH_WORKFLOWS_CHAINS (200), BENCH_WORKFLOWS_CHAIN_LENGTH (5),
 * BENCH_WORKFLOWS_PROCESSES (2), BENCH_WORKFLOWS_CONCURRENCY (50), BENCH_WORKFLOWS_TIMEOUT_MS (300000).
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import { createJobgate, type Jobgate } from '../src/index.js';
import { createLogger } from '../src/log.js';
import type { Figure } from './run.js';
import { spawnChild, type Child } from './support/children.js';
import { backendPids, measureCpu, type CpuSplit } from './support/cpu.js';
import { openServer, type BenchDatabase, type BenchServer } from './support/postgres.js';

const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const BATCH = env('BENCH_WORKFLOWS_BATCH', 10_000);
const CALL = env('BENCH_WORKFLOWS_CALL', 1000);
const REPEATS = env('BENCH_WORKFLOWS_REPEATS', 20);
const REPEAT_SIZE = env('BENCH_WORKFLOWS_REPEAT_SIZE', 500);
const CHAINS = env('BENCH_WORKFLOWS_CHAINS', 200);
const CHAIN_LENGTH = env('BENCH_WORKFLOWS_CHAIN_LENGTH', 5);
const PROCESSES = env('BENCH_WORKFLOWS_PROCESSES', 2);
const CONCURRENCY = env('BENCH_WORKFLOWS_CONCURRENCY', 50);
const TIMEOUT_MS = env('BENCH_WORKFLOWS_TIMEOUT_MS', 300_000);

const ENDPOINTS = { plain: 'bench.plain', member: 'bench.member', fanIn: 'bench.fan-in', chain: 'bench.chain' } as const;

const say = (msg: string) => process.stderr.write(`bench workflows: ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (samples: number[], q: number) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
};
const thousands = (n: number) => (n % 1000 === 0 ? `${n / 1000}k` : String(n));

/** Polls `done` every `everyMs` until it holds; throws after TIMEOUT_MS, naming `what`. */
async function until(what: string, done: () => Promise<boolean>, everyMs = 20): Promise<void> {
  const deadline = performance.now() + TIMEOUT_MS;
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error(`bench workflows: ${what} not done after ${TIMEOUT_MS} ms`);
    await sleep(everyMs);
  }
}

async function startWorkers(db: BenchDatabase): Promise<Child[]> {
  const children = Array.from({ length: PROCESSES }, (_, i) =>
    spawnChild('bench/workers/jobgate.ts', {
      DATABASE_URL: db.url,
      WORKER_ID: `bench-${i + 1}`,
      CONCURRENCY: String(CONCURRENCY),
      BATCH_SIZE: String(CONCURRENCY),
    }),
  );
  await Promise.all(children.map((c) => c.line('ready')));
  return children;
}

interface Drain {
  rate: number;
  cpu: CpuSplit | undefined;
  /** The longest time between two attempts starting (database clock), ms: a drain that stalled shows here. */
  pause: number;
}

/**
 * Starts fresh workers on what is waiting, waits for `drained`, stops them, and reads the drain of
 * the executions `scope` selects (a condition on `e`, executions, and `j`, jobs; `$1` its value).
 */
async function drain(
  server: BenchServer,
  db: BenchDatabase,
  c: pg.Client,
  label: string,
  expected: number,
  scope: { where: string; value: string },
  drained: () => Promise<boolean>,
): Promise<Drain> {
  await c.query('analyze');
  await c.query('checkpoint').catch(() => {}); // needs superuser; harmless without
  // The backends serving the workers only: not the bench's own connections, open before them
  // (an idle one of the library's pool may close mid-drain, and its CPU is not the drain's).
  const local = server.source !== 'BENCH_DATABASE_URL';
  const own = new Set(await backendPids(c, db.name, local));
  const children = await startWorkers(db);
  try {
    const cpu = measureCpu(
      (await backendPids(c, db.name, local)).filter((pid) => !own.has(pid)),
      children.map((ch) => ch.pid),
    );
    children.forEach((ch) => ch.send('go'));
    await until(`the ${label} drain`, drained, 50);
    const split = cpu.stop(expected);
    const { rows } = await c.query(
      `with a as (
         select a.started_at, a.finished_at, a.outcome, a.started_at - lag(a.started_at) over (order by a.started_at) as gap
         from attempts a join executions e on e.id = a.execution_id join jobs j on j.id = e.job_id
         where ${scope.where})
       select extract(epoch from max(finished_at) - min(started_at)) * 1000 as ms, count(*)::int as attempts,
              count(*) filter (where outcome = 'SUCCEEDED')::int as ok, coalesce(extract(epoch from max(gap)) * 1000, 0) as pause
       from a`,
      [scope.value],
    );
    const { ms, attempts, ok, pause } = rows[0] as { ms: number; attempts: number; ok: number; pause: number };
    if (attempts !== expected || ok !== expected) say(`${label}: ${attempts} attempts, ${ok} succeeded (expected ${expected} each)`);
    say(
      `${label}: ${expected} executions drained in ${Math.round(ms)} ms by attempts; longest pause between attempt starts ${Math.round(pause)} ms`,
    );
    if (process.env.BENCH_WORKFLOWS_DEBUG) {
      // Attempts started in each 100 ms of the drain, by worker: where the time went.
      const { rows: steps } = await c.query(
        `with a as (
           select a.worker_id, a.started_at, a.finished_at, min(a.started_at) over () as t0
           from attempts a join executions e on e.id = a.execution_id join jobs j on j.id = e.job_id where ${scope.where})
         select floor(extract(epoch from started_at - t0) * 10)::int as step, worker_id, count(*)::int as n,
                round(avg(extract(epoch from finished_at - started_at) * 1000))::int as held
         from a group by 1, 2 order by 1, 2`,
        [scope.value],
      );
      say(
        `${label}, attempts started per 100 ms (step worker count avg-ms-to-finish): ${steps.map((r) => `${r.step}:${r.worker_id}:${r.n}:${r.held}`).join(' ')}`,
      );
    }
    return { rate: (ok / ms) * 1000, cpu: split, pause: Number(pause) };
  } finally {
    await Promise.all(children.map((ch) => ch.stop()));
  }
}

const scheduledStatus = async (c: pg.Client, jobId: string): Promise<string | undefined> =>
  (await c.query(`select status from executions where job_id = $1 and trigger = 'SCHEDULE'`, [jobId])).rows[0]?.status;

/** Last member's end to the onComplete execution's first attempt start (database clock), in ms. */
async function fanIn(c: pg.Client, batchId: string): Promise<number> {
  const { rows } = await c.query(
    `select extract(epoch from
              (select a.started_at from attempts a join executions e on e.id = a.execution_id
               where e.job_id = b.on_complete_job_id and e.trigger = 'SCHEDULE' order by a.attempt_number limit 1)
            - (select max(e.finished_at) from executions e join jobs j on j.id = e.job_id
               where j.batch_id = b.id and e.trigger = 'SCHEDULE')) * 1000 as ms,
            b.total, b.succeeded
     from batches b where b.id = $1`,
    [batchId],
  );
  const { ms, total, succeeded } = rows[0] as { ms: number; total: number; succeeded: number };
  if (succeeded !== total) say(`batch ${batchId}: ${succeeded} of ${total} members succeeded`);
  return Number(ms);
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  say(
    `postgres: ${server.source}; batch of ${BATCH} (calls of ${CALL}), ${REPEATS} batches of ${REPEAT_SIZE}, ` +
      `${CHAINS} chains of ${CHAIN_LENGTH}; ${PROCESSES} worker process(es) of concurrency ${CONCURRENCY}`,
  );
  const [load] = os.loadavg();
  if (load! > os.availableParallelism() / 4)
    say(`load average ${load!.toFixed(2)} on ${os.availableParallelism()} cores: other work is running, figures will be noisy`);
  const db = await server.createDatabase('jobgate_bench_workflows');
  let gate: Jobgate | undefined;
  const c = new pg.Client({ connectionString: db.url });
  try {
    await migrate(db.url);
    gate = await createJobgate({ databaseUrl: db.url, migrate: false, poolMax: 4, log: createLogger('warn') });
    await c.connect();
    return await measure(server, db, gate, c);
  } finally {
    await c.end().catch(() => {});
    await gate?.close();
    await db.drop();
    await server.close();
  }
}

async function measure(server: BenchServer, db: BenchDatabase, gate: Jobgate, c: pg.Client): Promise<Figure[]> {
  const client = gate.client;
  const figures: Figure[] = [];
  const figure = (bench: string, value: number, unit: string, system = 'jobgate') => {
    figures.push({ bench, system, value, unit });
    return value;
  };
  const endpoint: Record<keyof typeof ENDPOINTS, string> = { plain: '', member: '', fanIn: '', chain: '' };
  for (const [k, name] of Object.entries(ENDPOINTS) as [keyof typeof ENDPOINTS, string][])
    endpoint[k] = (await client.registerEndpoint({ name, kind: 'HANDLER', handlerName: 'noop', maxAttempts: 1 })).id;
  const job = (endpointName: string, more: { batchId?: string; dependsOn?: string[] } = {}) => ({
    endpointName,
    kind: 'IMMEDIATE' as const,
    ...more,
  });
  const calls = (n: number) => Array.from({ length: Math.ceil(n / CALL) }, (_, i) => Math.min(CALL, n - i * CALL));
  const size = thousands(BATCH);

  // The plain jobs made by createJobs, then drained; then the batch made and drained. Each drain
  // starts with nothing else waiting: its workers take only what it measures.
  const live = (where: string, value: string) => async () =>
    !(
      await c.query(
        `select exists (select 1 from executions where status = 'PENDING' and ${where})
             or exists (select 1 from executions where status = 'RUNNING' and ${where}) as live`,
        [value],
      )
    ).rows[0].live;
  let t0 = performance.now();
  for (const n of calls(BATCH)) await client.createJobs(Array.from({ length: n }, () => job(ENDPOINTS.plain)));
  const plainMs = performance.now() - t0;
  say(`created ${BATCH} plain jobs in ${Math.round(plainMs)} ms`);
  const plain = await drain(
    server,
    db,
    c,
    'plain',
    BATCH,
    { where: 'e.endpoint_id = $1', value: endpoint.plain },
    live('endpoint_id = $1', endpoint.plain),
  );

  t0 = performance.now();
  const [first, ...rest] = calls(BATCH);
  const { batch } = await client.createBatch({
    name: 'bench',
    open: true,
    jobs: Array.from({ length: first! }, () => job(ENDPOINTS.member)),
    onComplete: job(ENDPOINTS.fanIn),
  });
  const opened = performance.now();
  for (const n of rest) await client.createJobs(Array.from({ length: n }, () => job(ENDPOINTS.member, { batchId: batch.id })));
  const added = performance.now();
  await client.closeBatch(batch.id);
  const closed = performance.now();
  const batchMs = closed - t0;
  say(`created a batch of ${BATCH} in ${Math.round(batchMs)} ms`);
  figure(`workflows.create.batch-${size}.total`, batchMs, 'ms');
  figure(`workflows.create.batch-${size}.per-1k-members`, (batchMs / BATCH) * 1000, 'ms');
  figure(`workflows.create.batch-${size}.createBatch-first-${thousands(first!)}`, opened - t0, 'ms');
  if (rest.length > 0)
    figure(`workflows.create.batch-${size}.createJobs-batchId-per-1k`, ((added - opened) / (BATCH - first!)) * 1000, 'ms');
  figure(`workflows.create.batch-${size}.closeBatch`, closed - added, 'ms');
  figure(`workflows.create.plain-${size}.createJobs-per-1k`, (plainMs / BATCH) * 1000, 'ms');
  const fanInJob = batch.onCompleteJobId!;
  const members = await drain(server, db, c, 'batch members', BATCH, { where: 'j.batch_id = $1', value: batch.id }, async () => {
    return (await scheduledStatus(c, fanInJob)) === 'SUCCEEDED';
  });
  figure(`workflows.drain.plain-${size}`, plain.rate, 'executions/s');
  figure(`workflows.drain.batch-${size}-members`, members.rate, 'executions/s');
  figure(`workflows.drain.batch-${size}-members`, members.rate / plain.rate, 'ratio', 'jobgate batch/plain');
  figure(`workflows.drain.plain-${size}.longest-pause`, plain.pause, 'ms');
  figure(`workflows.drain.batch-${size}-members.longest-pause`, members.pause, 'ms');
  for (const [label, d] of [
    [`plain-${size}`, plain],
    [`batch-${size}-members`, members],
  ] as const) {
    if (!d.cpu) continue;
    figure(`workflows.drain.cpu-per-execution.postgres.${label}`, d.cpu.postgres, 'µs');
    figure(`workflows.drain.cpu-per-execution.workers.${label}`, d.cpu.workers, 'µs');
  }
  const bigFanIn = await fanIn(c, batch.id);
  say(`batch of ${BATCH}: last member's end to onComplete's start ${bigFanIn.toFixed(1)} ms`);
  figure(`workflows.fan-in.batch-${size}`, bigFanIn, 'ms');

  // Fan-in latency, batch after batch, with the workers left running.
  const children = await startWorkers(db);
  try {
    children.forEach((ch) => ch.send('go'));
    await Promise.all(children.map((ch) => ch.line('started')));
    const samples: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      const { batch: b } = await client.createBatch({
        jobs: Array.from({ length: REPEAT_SIZE }, () => job(ENDPOINTS.member)),
        onComplete: job(ENDPOINTS.fanIn),
      });
      await until(`batch ${i + 1}'s onComplete`, async () => (await scheduledStatus(c, b.onCompleteJobId!)) === 'SUCCEEDED');
      samples.push(await fanIn(c, b.id));
    }
    if (samples.length > 0) {
      say(`${REPEATS} batches of ${REPEAT_SIZE}: fan-in ${samples.map((s) => s.toFixed(1)).join(', ')} ms`);
      const all = [...samples, bigFanIn];
      const over = `workflows.fan-in.${REPEATS}x${thousands(REPEAT_SIZE)}+1x${size}`;
      figure(`${over}.p50`, quantile(all, 0.5), 'ms');
      figure(`${over}.p99`, quantile(all, 0.99), 'ms');
      figure(`${over}.max`, Math.max(...all), 'ms');
    }

    // Chains: each created in one transaction, so each edge is settled by its prerequisite's end.
    if (CHAINS === 0) return figures;
    const chainStart = performance.now();
    for (let i = 0; i < CHAINS; i++) {
      const tx = await gate.database.pool.connect();
      try {
        await tx.query('begin');
        const inTx = gate.inTransaction(tx);
        let previous: string | undefined;
        for (let k = 0; k < CHAIN_LENGTH; k++) {
          const { job: created } = await inTx.createJob(job(ENDPOINTS.chain, previous ? { dependsOn: [previous] } : {}));
          previous = created.id;
        }
        await tx.query('commit');
      } catch (error) {
        await tx.query('rollback').catch(() => {});
        throw error;
      } finally {
        tx.release();
      }
    }
    const chainJobs = CHAINS * CHAIN_LENGTH;
    await until('the chains', async () => {
      const { rows } = await c.query(
        `select count(*)::int as n from executions where endpoint_id = $1 and status in ('SUCCEEDED', 'FAILED', 'CANCELLED')`,
        [endpoint.chain],
      );
      return rows[0].n >= chainJobs;
    });
    say(`${CHAINS} chains of ${CHAIN_LENGTH} created and run in ${Math.round(performance.now() - chainStart)} ms`);
    const { rows } = await c.query<{ ms: number; ok: boolean }>(
      `select extract(epoch from a.started_at - ep.finished_at) * 1000 as ms, ep.status = 'SUCCEEDED' and ed.status = 'SUCCEEDED' as ok
       from job_dependencies d
       join executions ep on ep.job_id = d.prerequisite_id and ep.trigger = 'SCHEDULE'
       join executions ed on ed.job_id = d.job_id and ed.trigger = 'SCHEDULE'
       join attempts a on a.execution_id = ed.id and a.attempt_number = 1
       where ed.endpoint_id = $1`,
      [endpoint.chain],
    );
    const edges = CHAINS * (CHAIN_LENGTH - 1);
    if (rows.length !== edges || rows.some((r) => !r.ok)) say(`chains: ${rows.length} edges read (expected ${edges}), some not SUCCEEDED`);
    if (rows.length > 0) {
      const hops = rows.map((r) => Number(r.ms));
      const chains = `workflows.chain.${CHAINS}x${CHAIN_LENGTH}.prerequisite-end-to-start`;
      figure(`${chains}.p50`, quantile(hops, 0.5), 'ms');
      figure(`${chains}.p99`, quantile(hops, 0.99), 'ms');
    }
  } finally {
    await Promise.all(children.map((ch) => ch.stop()));
  }
  return figures;
}

/**
 * createJob over GraphQL HTTP, requests/s with 50 concurrent clients, beside two references
 * measured in the same run on the same machine:
 *  - bare graphql-yoga answering `{ __typename }` (the ceiling of any yoga server here: parsing,
 *    validation, execution and HTTP, with no database); goal: jobgate at least 50% of it;
 *  - graphile-worker's `addJob` through its own API (makeWorkerUtils), 50 concurrent callers:
 *    an enqueue with no HTTP, no GraphQL, no authentication, no audit row and no event.
 * Each server runs in a child process (bench/workers/http-server.ts); this process is only the
 * load: CLIENTS loops, each sending its next request when the last is answered, over one
 * keep-alive connection each, for DURATION_MS after a warm-up. Each createJob is a real
 * IMMEDIATE job on a HANDLER endpoint: the key checked, the input validated, the job, its
 * execution, its audit row and its events written in one transaction.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Agent, request } from 'undici';
import { migrate } from '../src/db/migrate.js';
import type { Figure } from './run.js';
import { spawnChild, type Child } from './support/children.js';
import { cpuSeconds } from './support/cpu.js';
import { openServer } from './support/postgres.js';

const CLIENTS = 50;
const WARMUP_MS = 2_000;
const DURATION_MS = 10_000;

const CREATE = `mutation ($input: CreateJobInput!) { createJob(input: $input) { job { id } } }`;

/** Requests/s of CLIENTS loops posting `body()` to `url` for `ms`; every answer must be 200 without errors. */
async function load(url: string, headers: Record<string, string>, body: () => string, ms: number): Promise<number> {
  const dispatcher = new Agent({ connections: CLIENTS, pipelining: 1 });
  let n = 0;
  const t0 = performance.now();
  const until = t0 + ms;
  try {
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (performance.now() < until) {
          const res = await request(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...headers },
            body: body(),
            dispatcher,
          });
          const text = await res.body.text();
          if (res.statusCode !== 200 || text.includes('"errors"'))
            throw new Error(`bench create-job: ${res.statusCode} ${text.slice(0, 300)}`);
          n++;
        }
      }),
    );
  } finally {
    await dispatcher.close();
  }
  return n / ((performance.now() - t0) / 1000);
}

/**
 * The load's rate, and the server process's CPU per request in µs (undefined where /proc cannot
 * be read): a steadier figure than the rate on a loaded or shared machine, since the load, the
 * server and the database share its cores.
 */
async function measure(
  child: Child,
  url: string,
  headers: Record<string, string>,
  body: () => string,
  afterWarmup: () => Promise<void> = async () => {},
): Promise<{ rate: number; cpuUs: number | undefined }> {
  await load(url, headers, body, WARMUP_MS);
  await afterWarmup();
  const before = cpuSeconds([child.pid]);
  const t0 = performance.now();
  const rate = await load(url, headers, body, DURATION_MS);
  const seconds = (performance.now() - t0) / 1000;
  const after = cpuSeconds([child.pid]);
  const cpuUs = before === undefined || after === undefined ? undefined : ((after - before) * 1e6) / (rate * seconds);
  return { rate, cpuUs };
}

async function analyse(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('analyze');
  } finally {
    await client.end();
  }
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const figures: Figure[] = [];
  const fig = (system: string, value: number) =>
    figures.push({ bench: `createJob, ${CLIENTS} concurrent clients`, system, value, unit: 'req/s' });
  try {
    // Bare yoga.
    const yoga = spawnChild('bench/workers/http-server.ts', { SERVER: 'yoga' });
    const yogaUrl = await yoga.line('ready', 60_000);
    const typename = () => JSON.stringify({ query: '{ __typename }' });
    const bare = await measure(yoga, yogaUrl, {}, typename);
    await yoga.stop();

    // jobgate's gateway.
    const db = await server.createDatabase('jobgate_bench_create');
    await migrate(db.url);
    const gate = spawnChild('bench/workers/http-server.ts', { SERVER: 'jobgate', DATABASE_URL: db.url });
    const [base, key] = (await gate.line('ready', 60_000)).split(' ');
    const gqlUrl = base!;
    let i = 0;
    const create = () =>
      JSON.stringify({ query: CREATE, variables: { input: { kind: 'IMMEDIATE', endpointName: 'bench.create', input: { i: i++ } } } });
    const auth = { authorization: `Bearer ${key}` };
    // After the warm-up, the tables are analysed, as autovacuum does within a minute of such load
    // and pgbench before each run: the database is new, and without it the measurement would be of
    // a new database's first minute only, whose foreign-key checks (an execution's job) run plans
    // made while the tables were empty, a sequential scan per row that grows with every job.
    const gateway = await measure(gate, gqlUrl, auth, create, () => analyse(db.url));
    await gate.stop();
    await db.drop();

    // graphile-worker's addJob (its own load loop, in its process).
    const gdb = await server.createDatabase('jobgate_bench_graphile_add');
    const graphile = spawnChild('bench/workers/http-server.ts', {
      SERVER: 'graphile',
      DATABASE_URL: gdb.url,
      CLIENTS: String(CLIENTS),
      DURATION_MS: String(DURATION_MS),
    });
    await graphile.line('ready', 60_000);
    graphile.send('go');
    const [n, ms] = (await graphile.line('done', DURATION_MS + 60_000)).split(' ').map(Number);
    await graphile.stop();
    await gdb.drop();

    fig('jobgate createJob over GraphQL HTTP', gateway.rate);
    fig('bare graphql-yoga { __typename }', bare.rate);
    figures.push({
      bench: `createJob, ${CLIENTS} concurrent clients`,
      system: 'jobgate as a share of bare yoga (goal: at least 50%)',
      value: (100 * gateway.rate) / bare.rate,
      unit: '%',
    });
    const cpu = (system: string, value: number | undefined) =>
      value !== undefined && figures.push({ bench: `createJob, ${CLIENTS} concurrent clients`, system, value, unit: 'µs CPU/req' });
    cpu('jobgate gateway process, per createJob', gateway.cpuUs);
    cpu('bare graphql-yoga process, per { __typename }', bare.cpuUs);
    fig('graphile-worker addJob (library call)', n! / (ms! / 1000));
  } finally {
    await server.close();
  }
  return figures;
}

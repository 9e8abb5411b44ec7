/**
 * createJob over GraphQL HTTP, requests/s with 50 concurrent clients, beside two references
 * measured in the same run on the same machine:
 *  - bare graphql-yoga answering `{ __typename }` (the ceiling of any yoga server here: parsing,
 *    validation, execution and HTTP, with no database); goal: jobgate at least 50% of it;
 *  - graphile-worker's `addJob` through its own API (makeWorkerUtils), 50 concurrent callers:
 *    an enqueue with no HTTP, no GraphQL, no authentication, no audit row and no event.
 * Each server runs in a child process (bench/workers/http-server.ts); this process is only the
 * load: CLIENTS loops, each sending its next request when the last is answered, over one
 * keep-alive connection each. jobgate and bare yoga are measured after a warm-up in alternating
 * rounds (ROUNDS of ROUND_MS), graphile-worker for DURATION_MS. Each createJob is a real
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
/** jobgate and bare yoga are measured in alternating rounds of ROUND_MS. */
const ROUNDS = 5;
const ROUND_MS = 4_000;

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

interface Server {
  child: Child;
  url: string;
  headers: Record<string, string>;
  body: () => string;
}

/**
 * One round: the load's rate on `server` for ROUND_MS, and the server process's CPU per request
 * in µs (undefined where /proc cannot be read).
 */
async function round(server: Server): Promise<{ rate: number; cpuUs: number | undefined }> {
  const before = cpuSeconds([server.child.pid]);
  const t0 = performance.now();
  const rate = await load(server.url, server.headers, server.body, ROUND_MS);
  const seconds = (performance.now() - t0) / 1000;
  const after = cpuSeconds([server.child.pid]);
  const cpuUs = before === undefined || after === undefined ? undefined : ((after - before) * 1e6) / (rate * seconds);
  return { rate, cpuUs };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

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
    // Both servers up at once, measured in alternating rounds, so that whatever else the machine
    // does meanwhile (its cores are shared, and vary) weighs on both alike; the figures are the
    // medians, the share the median of the rounds' own shares.
    const yoga = spawnChild('bench/workers/http-server.ts', { SERVER: 'yoga' });
    const bare: Server = {
      child: yoga,
      url: await yoga.line('ready', 60_000),
      headers: {},
      body: () => JSON.stringify({ query: '{ __typename }' }),
    };

    const db = await server.createDatabase('jobgate_bench_create');
    await migrate(db.url);
    // One key sending as fast as 50 clients can: its bound on requests a second (50 by default)
    // is off, as a deployment whose one client is this busy would set it (bench/bounds.ts
    // measures the bounds).
    const gate = spawnChild('bench/workers/http-server.ts', { SERVER: 'jobgate', DATABASE_URL: db.url, BOUNDS: 'off' });
    const [base, key] = (await gate.line('ready', 60_000)).split(' ');
    let i = 0;
    const gateway: Server = {
      child: gate,
      url: base!,
      headers: { authorization: `Bearer ${key}` },
      body: () =>
        JSON.stringify({ query: CREATE, variables: { input: { kind: 'IMMEDIATE', endpointName: 'bench.create', input: { i: i++ } } } }),
    };

    await load(bare.url, bare.headers, bare.body, WARMUP_MS);
    await load(gateway.url, gateway.headers, gateway.body, WARMUP_MS);
    // After the warm-up, the tables are analysed, as autovacuum does within a minute of such load
    // and pgbench before each run: the database is new, and without it the measurement would be of
    // a new database's first minute only, whose foreign-key checks (an execution's job) run plans
    // made while the tables were empty, a sequential scan per row that grows with every job.
    await analyse(db.url);
    const rounds: { bare: Awaited<ReturnType<typeof round>>; gateway: Awaited<ReturnType<typeof round>> }[] = [];
    for (let r = 0; r < ROUNDS; r++) rounds.push({ bare: await round(bare), gateway: await round(gateway) });
    await yoga.stop();
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

    fig('jobgate createJob over GraphQL HTTP', median(rounds.map((r) => r.gateway.rate)));
    fig('bare graphql-yoga { __typename }', median(rounds.map((r) => r.bare.rate)));
    const shares = rounds.map((r) => (100 * r.gateway.rate) / r.bare.rate);
    const share = (system: string, value: number) =>
      figures.push({ bench: `createJob, ${CLIENTS} concurrent clients`, system, value, unit: '%' });
    share(`jobgate as a share of bare yoga, median of ${ROUNDS} rounds (goal: at least 50%)`, median(shares));
    share('  its lowest round', Math.min(...shares));
    share('  its highest round', Math.max(...shares));
    const cpuOf = (xs: (number | undefined)[]) => (xs.some((x) => x === undefined) ? undefined : median(xs as number[]));
    const cpu = (system: string, value: number | undefined) =>
      value !== undefined && figures.push({ bench: `createJob, ${CLIENTS} concurrent clients`, system, value, unit: 'µs CPU/req' });
    cpu('jobgate gateway process, per createJob', cpuOf(rounds.map((r) => r.gateway.cpuUs)));
    cpu('bare graphql-yoga process, per { __typename }', cpuOf(rounds.map((r) => r.bare.cpuUs)));
    fig('graphile-worker addJob (library call)', n! / (ms! / 1000));
  } finally {
    await server.close();
  }
  return figures;
}

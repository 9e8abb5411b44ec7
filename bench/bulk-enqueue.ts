/**
 * Bulk enqueue: jobs a second written by createJobs in batches of BATCH, from the library and over
 * GraphQL HTTP, beside graphile-worker's `addJobs` in the same batches, on the same server in
 * the same run. One caller, each batch sent when the last is answered, JOBS jobs per system on a
 * fresh database. jobgate writes, per job, what createJob writes: the job, its first execution,
 * its audit row and its events (and, over GraphQL, checks the key and parses a 1,000-item
 * document); graphile-worker writes a job row. Goals: 50,000 jobs/s from the library, 20,000/s
 * over GraphQL.
 */
import { performance } from 'node:perf_hooks';
import { makeWorkerUtils, runMigrations } from 'graphile-worker';
import pg from 'pg';
import { request } from 'undici';
import { migrate } from '../src/db/migrate.js';
import { createJobgate } from '../src/index.js';
import { createLogger } from '../src/log.js';
import type { Figure } from './run.js';
import { spawnChild } from './support/children.js';
import { graphileLogger } from './support/graphile.js';
import { openServer, type BenchServer } from './support/postgres.js';

const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const JOBS = env('BENCH_BULK_JOBS', 20_000);
const BATCH = 1_000;
const ENDPOINT = 'bench.create';
const say = (msg: string) => process.stderr.write(`bench bulk-enqueue: ${msg}\n`);

const batches = () => Array.from({ length: Math.ceil(JOBS / BATCH) }, (_, b) => Array.from({ length: BATCH }, (_, i) => b * BATCH + i));

/**
 * Jobs/s of `send` called for each batch in turn, after one unmeasured batch and an ANALYZE: on a
 * database never analyzed, Postgres checks each foreign key by a sequential scan of the table
 * (its plan for an empty table), which autovacuum's first analyze ends on a real installation.
 */
async function timed(url: string, send: (ns: number[]) => Promise<void>): Promise<number> {
  await send(Array.from({ length: BATCH }, (_, i) => -1 - i));
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('analyze').finally(() => c.end());
  const t0 = performance.now();
  for (const ns of batches()) await send(ns);
  return JOBS / ((performance.now() - t0) / 1000);
}

async function library(server: BenchServer): Promise<number> {
  const db = await server.createDatabase('jobgate_bench_bulk');
  try {
    await migrate(db.url);
    const gate = await createJobgate({ databaseUrl: db.url, migrate: false, log: createLogger('warn') });
    try {
      await gate.client.registerEndpoint({ name: ENDPOINT, kind: 'HANDLER', handlerName: 'noop' });
      return await timed(db.url, async (ns) => {
        await gate.client.createJobs(ns.map((n) => ({ endpointName: ENDPOINT, kind: 'IMMEDIATE', input: { n } })));
      });
    } finally {
      await gate.close();
    }
  } finally {
    await db.drop();
  }
}

/**
 * createJobs over GraphQL HTTP; `fields` is what each result asks (`eventCursor` too: what a page
 * that creates jobs and then watches them asks).
 */
async function graphql(server: BenchServer, fields: string): Promise<number> {
  const db = await server.createDatabase('jobgate_bench_bulk');
  try {
    await migrate(db.url);
    const gate = spawnChild('bench/workers/http-server.ts', { SERVER: 'jobgate', DATABASE_URL: db.url });
    try {
      const [url, key] = (await gate.line('ready', 60_000)).split(' ') as [string, string];
      const query = `mutation ($jobs: [CreateJobInput!]!) { createJobs(input: { jobs: $jobs }) { results { ${fields} } } }`;
      return await timed(db.url, async (ns) => {
        const res = await request(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
          body: JSON.stringify({
            query,
            variables: { jobs: ns.map((n) => ({ endpointName: ENDPOINT, kind: 'IMMEDIATE', input: { n } })) },
          }),
        });
        const text = await res.body.text();
        if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`createJobs: ${res.statusCode} ${text.slice(0, 300)}`);
      });
    } finally {
      await gate.stop();
    }
  } finally {
    await db.drop();
  }
}

async function graphile(server: BenchServer): Promise<number> {
  const db = await server.createDatabase('graphile_bench_bulk');
  try {
    await runMigrations({ connectionString: db.url, logger: graphileLogger });
    const utils = await makeWorkerUtils({ connectionString: db.url, logger: graphileLogger });
    try {
      return await timed(db.url, async (ns) => {
        await utils.addJobs(ns.map((n) => ({ identifier: 'noop', payload: { n } })));
      });
    } finally {
      await utils.release();
    }
  } finally {
    await db.drop();
  }
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const bench = `bulk enqueue, batches of ${BATCH}`;
  try {
    say('graphile-worker addJobs');
    const gw = await graphile(server);
    say('jobgate library createJobs');
    const lib = await library(server);
    say('jobgate GraphQL createJobs');
    const api = await graphql(server, 'job { id }');
    say('jobgate GraphQL createJobs, each result with its eventCursor');
    const withCursors = await graphql(server, 'job { id } eventCursor');
    return [
      { bench, system: 'graphile-worker addJobs', value: Math.round(gw), unit: 'jobs/s' },
      { bench, system: 'jobgate createJobs, library', value: Math.round(lib), unit: 'jobs/s (goal 50,000)' },
      { bench, system: 'jobgate createJobs, GraphQL', value: Math.round(api), unit: 'jobs/s (goal 20,000)' },
      { bench, system: 'jobgate createJobs, GraphQL, with eventCursor', value: Math.round(withCursors), unit: 'jobs/s' },
      { bench, system: 'jobgate library/graphile-worker', value: lib / gw, unit: 'ratio' },
    ];
  } finally {
    await server.close();
  }
}

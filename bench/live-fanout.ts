/**
 * Live fan-out across gateways: SUBSCRIBERS graphql-ws subscribers (a WebSocket each), split over
 * GATEWAYS `jobgate serve` processes, each watching its own job's executions
 * (`executionUpdates(jobId:)`), while a `jobgate worker` runs those jobs at RATE a second, so
 * each subscriber gets its execution's RUNNING and SUCCEEDED events. Every gateway hears every
 * event (its LISTEN connection) and hands each to the one subscriber it concerns, if that
 * subscriber is its own.
 *
 * Figures: commit → client p50/p99/max, from the event's `occurredAt` (the writing transaction's
 * start: the latency includes the rest of that transaction, so it is an upper bound) to its
 * arrival in the subscriber's process; and each gateway's resident memory per subscription
 * (RSS once every subscriber is live, minus RSS before the first connected, over its
 * subscribers: a WebSocket, its graphql-ws state and one subscription each).
 *
 * The pace: the endpoint is paused while the jobs are created and the subscribers connect, then
 * resumed with a rate limit of RATE starts a second (bursts of RATE/10). The subscribers run in
 * GATEWAYS child processes of their own (bench/workers/live-subscribers.ts), one per gateway,
 * so their event loops are neither the gateways' nor this one's. On a 2-core machine they share
 * the cores with the gateways, the worker and Postgres.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createJobService } from '../src/service/index.js';
import type { Figure } from './run.js';
import { spawnChild } from './support/children.js';
import { buildDist, startCli, type CliProcess } from './support/cli-process.js';
import { openServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

const SUBSCRIBERS = Number(process.env.BENCH_LIVE_SUBSCRIBERS ?? 10_000);
const GATEWAYS = 2;
const RATE = Number(process.env.BENCH_LIVE_RATE ?? 250);
const CREATE_BATCH = 1000;

async function graphql<T>(port: string, key: string, query: string, variables: unknown): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: unknown };
  if (!body.data) throw new Error(`bench live-fanout: ${JSON.stringify(body.errors)}`);
  return body.data;
}

export async function run(): Promise<Figure[]> {
  buildDist();
  const server = await openServer();
  const db = await server.createDatabase('jobgate_bench_live_fanout');
  const processes: CliProcess[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-live-fanout-'));
  try {
    await migrate(db.url);
    const setup = createDatabase({ connectionString: db.url, max: 2 });
    const service = createJobService({ db: setup.db, pool: setup.pool, defaultMaxAttempts: 1 });
    const { key } = await service.bootstrapKey('default', 'ADMIN', 'live fan-out bench');
    const actor = await service.authenticate(key);
    const endpoint = await service.registerEndpoint(actor, {
      name: 'bench.fanout',
      kind: 'HANDLER',
      handlerName: 'demo.echo',
      rateLimit: { count: RATE, periodMs: 1000, burst: Math.max(1, Math.round(RATE / 10)) },
    });
    await service.pauseEndpoint(actor, endpoint.id);

    // One key holds every subscriber, as a server fanning out to its users would: its bounds on
    // connections, subscriptions and requests are off.
    const env = {
      DATABASE_URL: db.url,
      DATABASE_POOL_MAX: '5',
      JOBGATE_DEMO_HANDLERS: 'on',
      JOBGATE_WORKER_CONCURRENCY: '50',
      JOBGATE_RATE_LIMIT_PER_SECOND: '0',
      JOBGATE_MAX_CONNECTIONS_PER_KEY: '0',
      JOBGATE_MAX_CONNECTIONS_PER_ADDRESS: '0',
      JOBGATE_MAX_SUBSCRIPTIONS_PER_KEY: '0',
    };
    const gateways: CliProcess[] = [];
    for (let i = 0; i < GATEWAYS; i++) gateways.push(await startCli('serve', env));
    processes.push(...gateways, await startCli('worker', env));

    // The jobs, with each one's event cursor from just before it was created.
    const jobs: [string, string][] = [];
    while (jobs.length < SUBSCRIBERS) {
      const n = Math.min(CREATE_BATCH, SUBSCRIBERS - jobs.length);
      const { createJobs } = await graphql<{ createJobs: { results: { eventCursor: string; job: { id: string } }[] } }>(
        gateways[0]!.port!,
        key,
        `
          mutation ($jobs: [CreateJobInput!]!) {
            createJobs(input: { jobs: $jobs }) {
              results {
                eventCursor
                job {
                  id
                }
              }
            }
          }
        `,
        { jobs: Array.from({ length: n }, (_, i) => ({ kind: 'IMMEDIATE', endpointName: 'bench.fanout', input: { i: jobs.length + i } })) },
      );
      for (const r of createJobs.results) jobs.push([r.job.id, r.eventCursor]);
    }

    const before = gateways.map((g) => g.stats().rss);
    const subscribers = gateways.map((g, i) => {
      const mine = jobs.filter((_, j) => j % GATEWAYS === i);
      const file = path.join(dir, `subscribers-${i}.json`);
      fs.writeFileSync(file, JSON.stringify(mine));
      return {
        count: mine.length,
        child: spawnChild('bench/workers/live-subscribers.ts', { URL: `ws://127.0.0.1:${g.port}/graphql`, KEY: key, FILE: file }),
      };
    });
    await Promise.all(subscribers.map((s) => s.child.line('ready', 600_000)));
    const after = gateways.map((g) => g.stats().rss);

    const started = Date.now();
    const cpuBefore = processes.map((p) => p.stats().cpuMicros);
    await service.resumeEndpoint(actor, endpoint.id);
    const drainMs = (SUBSCRIBERS / RATE) * 1000;
    const lines = await Promise.all(subscribers.map((s) => s.child.line('done', drainMs + 120_000)));
    const wallMs = Date.now() - started;
    const cpu = processes.map((p, i) => ((p.stats().cpuMicros - cpuBefore[i]!) / 1000 / wallMs) * 100);
    await Promise.all(subscribers.map((s) => s.child.stop()));

    const { rows } = await setup.pool.query<{ per_second: number }>(
      `select count(*) / extract(epoch from max(a.started_at) - min(a.started_at)) as per_second
         from attempts a join executions e on e.id = a.execution_id join endpoints en on en.id = e.endpoint_id
        where en.name = 'bench.fanout'`,
    );
    const startsPerSecond = Number(rows[0]!.per_second);
    const latencies = lines
      .flatMap((l) => (l ? l.split(',') : []))
      .map(Number)
      .sort((a, b) => a - b);
    if (latencies.length !== SUBSCRIBERS * 2)
      throw new Error(`bench live-fanout: ${latencies.length} events of ${SUBSCRIBERS * 2} arrived`);
    await setup.close();
    const system = `jobgate, ${SUBSCRIBERS} subscribers over ${GATEWAYS} gateways, ${RATE} executions/s`;
    const perSubscription = gateways.map((_, i) => (after[i]! - before[i]!) / 1024 / subscribers[i]!.count);
    return [
      { bench: 'live fan-out', system, value: startsPerSecond, unit: 'executions started a second (the rate limit allows RATE)' },
      { bench: 'live fan-out', system, value: latencies.length / (wallMs / 1000), unit: 'events/s delivered' },
      { bench: 'live fan-out', system, value: quantile(latencies, 0.5), unit: 'ms commit-to-client p50' },
      { bench: 'live fan-out', system, value: quantile(latencies, 0.99), unit: 'ms commit-to-client p99' },
      { bench: 'live fan-out', system, value: latencies.at(-1)!, unit: 'ms commit-to-client max' },
      ...gateways.map((_, i) => ({ bench: 'live fan-out', system, value: after[i]! / 1024 / 1024, unit: `MB RSS, gateway ${i + 1}` })),
      { bench: 'live fan-out', system, value: Math.max(...perSubscription), unit: 'KiB RSS per subscription (the larger gateway)' },
      ...gateways.map((_, i) => ({
        bench: 'live fan-out',
        system,
        value: cpu[i]!,
        unit: `% of a core, gateway ${i + 1}, while the jobs ran`,
      })),
      { bench: 'live fan-out', system, value: cpu[GATEWAYS]!, unit: '% of a core, the worker, while the jobs ran' },
    ];
  } finally {
    for (const p of processes.reverse()) await p.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    await db.drop();
    await server.close();
  }
}

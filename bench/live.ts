/**
 * Live subscriptions under load: 1,000 graphql-ws subscribers (one WebSocket each) on one
 * gateway process, watching 10 runs with runProgress, while the runs checkpoint 100 times a
 * second in total. Figures: delivery latency from the checkpoint's commit (as its writer saw
 * it acknowledged) to each subscriber, p50/p99, and the gateway process's RSS and CPU.
 *
 * The gateway is `jobgate serve` as deployed, in its own process (bench/support/cli-process.ts),
 * so its memory and CPU are its own. The checkpoints are
 * the same single UPDATE a recoverable runner makes, issued from this process, so writer and
 * subscribers share one clock.
 */
import { performance } from 'node:perf_hooks';
import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { migrate } from '../src/db/migrate.js';
import { createDatabase } from '../src/db/pool.js';
import { createJobService } from '../src/service/index.js';
import type { Figure } from './run.js';
import { buildDist, startCli } from './support/cli-process.js';
import { openServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

/** `jobgate serve` on `url` (bench/support/cli-process.ts). */
async function serve(url: string, flags: string[]) {
  // One key holds every subscriber: its bounds on connections, subscriptions and requests a
  // second are off, as a deployment serving this many with one key would set them.
  const gateway = await startCli(
    'serve',
    {
      DATABASE_URL: url,
      JOBGATE_RATE_LIMIT_PER_SECOND: '0',
      JOBGATE_MAX_CONNECTIONS_PER_KEY: '0',
      JOBGATE_MAX_CONNECTIONS_PER_ADDRESS: '0',
      JOBGATE_MAX_SUBSCRIPTIONS_PER_KEY: '0',
    },
    flags,
  );
  return { ...gateway, port: gateway.port! };
}

const SUBSCRIBERS = Number(process.env.BENCH_LIVE_SUBSCRIBERS ?? 1000);
const RUNS = 10;
const CHECKPOINTS_PER_SECOND = 100;
const WARMUP_MS = 3_000;
const MEASURE_MS = Number(process.env.BENCH_LIVE_MS ?? 15_000);

/**
 * Twice: with node's defaults, and with the old generation capped at 256 MB as a container
 * deployment would set it (NODE_OPTIONS). The live set is small (about 45 MB of heap after a
 * mark-compact at 1,000 subscribers); what the cap changes is how much garbage V8 lets pile up
 * before collecting it, which is most of the difference in RSS between the two.
 */
export async function run(): Promise<Figure[]> {
  buildDist();
  return [...(await measure([], 'node defaults')), ...(await measure(['--max-old-space-size=256'], 'old space 256 MB'))];
}

async function measure(flags: string[], label: string): Promise<Figure[]> {
  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_live');
  const clients: Client[] = [];
  try {
    await migrate(target.url);
    const database = createDatabase({ connectionString: target.url, max: 4 });
    const service = createJobService({ db: database.db, defaultMaxAttempts: 5 });
    const { key } = await service.bootstrapKey('default', 'VIEWER', 'live bench');
    const actor = await service.authenticate(key);
    const system = { ...actor, kind: 'system' as const, role: 'ADMIN' as const };
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) runIds.push((await service.triggerRun(system, { name: `bench.live.${i}`, force: true })).run.id);

    const gateway = await serve(target.url, flags);
    const { port, stats } = gateway;

    // When each (run, processed) checkpoint was acknowledged to its writer.
    const committedAt = new Map<string, number>();
    const latencies: number[] = [];
    let measuring = false;
    let received = 0;
    const connected: Promise<void>[] = [];
    for (let i = 0; i < SUBSCRIBERS; i++) {
      const runId = runIds[i % RUNS]!;
      const client = createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: { authorization: `Bearer ${key}` },
        retryAttempts: 0,
      });
      clients.push(client);
      connected.push(
        new Promise<void>((resolve, reject) => {
          let first = true;
          client.subscribe<{ runProgress: { processed: number } }>(
            { query: `subscription($id: ID!) { runProgress(runId: $id) { processed } }`, variables: { id: runId } },
            {
              next: (message) => {
                const now = performance.now();
                if (first) {
                  first = false;
                  resolve();
                  return;
                }
                const at = committedAt.get(`${runId}:${message.data!.runProgress.processed}`);
                if (measuring && at !== undefined) {
                  latencies.push(now - at);
                  received++;
                }
              },
              error: reject,
              complete: () => {},
            },
          );
        }),
      );
    }
    await Promise.all(connected);

    // The writer: round-robin over the runs, one checkpoint every 10 ms.
    const writer = new pg.Client({ connectionString: target.url });
    await writer.connect();
    let stop = false;
    let written = 0;
    const processed = new Map(runIds.map((id) => [id, 0]));
    const writing = (async () => {
      const interval = 1000 / CHECKPOINTS_PER_SECOND;
      const start = performance.now();
      for (let n = 0; !stop; n++) {
        const wait = start + n * interval - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const runId = runIds[n % RUNS]!;
        const next = processed.get(runId)! + 1;
        processed.set(runId, next);
        await writer.query(
          `update runs set cursor = $2, cursor_json = true, processed = $3::bigint, stats = jsonb_build_object('batches', $3::bigint), heartbeat_at = now(), updated_at = now() where id = $1`,
          [runId, Buffer.from(JSON.stringify({ next })), next],
        );
        committedAt.set(`${runId}:${next}`, performance.now());
        written++;
      }
    })();

    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const before = stats();
    const writtenBefore = written;
    measuring = true;
    await new Promise((r) => setTimeout(r, MEASURE_MS));
    measuring = false;
    const after = stats();
    const writtenDuring = written - writtenBefore;
    stop = true;
    await writing;
    await writer.end();
    await Promise.all(clients.splice(0).map((c) => c.dispose()));
    await gateway.stop();
    await database.close();

    latencies.sort((a, b) => a - b);
    const wallMs = after.at - before.at;
    const system_ = `jobgate, ${SUBSCRIBERS} subscribers, ${label}`;
    return [
      { bench: 'live', system: system_, value: writtenDuring / (wallMs / 1000), unit: 'checkpoints/s written' },
      { bench: 'live', system: system_, value: received / (wallMs / 1000), unit: 'updates/s delivered (all subscribers)' },
      { bench: 'live', system: system_, value: quantile(latencies, 0.5), unit: 'ms commit-to-client p50' },
      { bench: 'live', system: system_, value: quantile(latencies, 0.95), unit: 'ms commit-to-client p95' },
      { bench: 'live', system: system_, value: quantile(latencies, 0.99), unit: 'ms commit-to-client p99' },
      { bench: 'live', system: system_, value: latencies.at(-1) ?? NaN, unit: 'ms commit-to-client max' },
      { bench: 'live', system: system_, value: after.rss / 1024 / 1024, unit: 'MB gateway RSS' },
      {
        bench: 'live',
        system: system_,
        value: ((after.cpuMicros - before.cpuMicros) / 1000 / wallMs) * 100,
        unit: '% of a core, gateway CPU',
      },
    ];
  } finally {
    await Promise.all(clients.map((c) => c.dispose()));
    await target.drop();
    await server.close();
  }
}

/**
 * Bounds on load (src/service/access/load-bounds.ts): the latency another key sees while one key floods
 * the gateway, with the default bounds and with them off. Goal: with the bounds, the other key's
 * p99 under a flood stays within 2x of its quiet figure.
 *
 * The gateway (bench/workers/http-server.ts: startGateway on a fresh database) runs in a child
 * process; so does the flood (bench/workers/flood.ts: 50 clients posting createJob as fast as
 * they are answered, either all as one key or each with a made-up key), so this process only
 * times the other key: VICTIM_RATE requests a second, sent on a fixed schedule whether or not the
 * previous one has been answered (a closed loop would slow down with the server and hide the
 * queueing), each a read of the workspace and its first ten jobs. Phases of PHASE_MS each: quiet,
 * one-key flood, random-key flood. Before them, a warm-up runs the victim's reads and the flood's
 * createJob through the gateway (as a gateway in service has run them), and the flood's process
 * warms its own HTTP client, so that no phase times code compiling for the first time. The machine's other work weighs on every phase alike only as
 * far as it is steady: read the figures of one run side by side, not across runs.
 * BENCH_BOUNDS_ONLY names one setting to run alone; IN_FLIGHT sets the gateway's requests in flight
 * per key (to compare values of that bound).
 */
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { migrate } from '../src/db/migrate.js';
import type { Figure } from './run.js';
import { spawnChild, type Child } from './support/children.js';
import { cpuSeconds } from './support/cpu.js';
import { openServer, type BenchServer } from './support/postgres.js';
import { quantile } from './support/quantile.js';

const VICTIM_RATE = 40;
/**
 * Long enough that a flood's opening (its fifty connections and first requests arriving at once,
 * a tenth to a third of a second) is a few reads of the phase's 1,200, as it is a small part of any
 * flood that lasts: over 8 s phases those few were the whole phase's p99 (4 of 320 reads). The
 * opening has figures of its own (`opening`).
 */
const PHASE_MS = 30_000;
const WARMUP_MS = 2_000;
const FLOOD_CLIENTS = 50;
const READ = `{ workspace { slug } jobs(first: 10) { nodes { id } } }`;
const CREATE = `mutation ($input: CreateJobInput!) { createJob(input: $input) { job { id } } }`;
const WARMUP_CREATES = 100;

/**
 * Latencies (ms) of `key`'s reads sent VICTIM_RATE a second for `ms`, sorted; every answer must be
 * a 200 without errors. `afterFirstSecond`: those of the reads sent after the first second, when a
 * flood's opening (its burst the bounds allow, its connections opening at once) is over;
 * `firstSecond`: those sent in it.
 */
async function victim(url: string, key: string, ms: number): Promise<number[] & { afterFirstSecond: number[]; firstSecond: number[] }> {
  const dispatcher = new Agent({ connections: 20 });
  const times: number[] = [];
  const later: number[] = [];
  const opening: number[] = [];
  const sent: Promise<void>[] = [];
  const t0 = performance.now();
  try {
    for (let n = 0; performance.now() - t0 < ms; n++) {
      const due = t0 + (n * 1000) / VICTIM_RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      sent.push(
        (async () => {
          const start = performance.now();
          const res = await request(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
            body: JSON.stringify({ query: READ }),
            dispatcher,
          });
          const text = await res.body.text();
          if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`bench bounds: ${res.statusCode} ${text.slice(0, 300)}`);
          times.push(performance.now() - start);
          (start - t0 >= 1000 ? later : opening).push(performance.now() - start);
        })(),
      );
    }
    await Promise.all(sent);
  } finally {
    await dispatcher.close();
  }
  return Object.assign(
    times.sort((a, b) => a - b),
    { afterFirstSecond: later.sort((a, b) => a - b), firstSecond: opening.sort((a, b) => a - b) },
  );
}

interface Phase {
  name: string;
  times: number[];
  /** The latencies of reads sent after the phase's first second. */
  later: number[];
  /** The latencies of reads sent in the phase's first second. */
  opening: number[];
  /** The flood's answers a second: 200, 429, other (401 for made-up keys). */
  flood?: { ok: number; refused: number; other: number };
  /** The gateway process's CPU per request answered in the phase (flood and victim), µs; undefined without /proc. */
  cpuUs: number | undefined;
}

/** Runs `phase`, and the gateway's CPU per request it answered (`answered` of its result). */
async function withCpu<T>(gate: Child, phase: () => Promise<T>, answered: (r: T) => number): Promise<[T, number | undefined]> {
  const before = cpuSeconds([gate.pid]);
  const result = await phase();
  const after = cpuSeconds([gate.pid]);
  return [result, before === undefined || after === undefined ? undefined : ((after - before) * 1e6) / answered(result)];
}

/**
 * `count` createJobs as `key`, one after another: the warm-up runs the flood's path through the
 * gateway before anything is timed, as a gateway in service has, so the first flood's figures are
 * not its first createJobs compiling.
 */
async function createJobs(url: string, key: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: CREATE, variables: { input: { kind: 'IMMEDIATE', endpointName: 'bench.create', input: { i } } } }),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200 || text.includes('"errors"'))
      throw new Error(`bench bounds: warm-up ${res.statusCode} ${text.slice(0, 300)}`);
  }
}

/** The victim timed while a flood (`env` for bench/workers/flood.ts) runs beside it. */
async function underFlood(name: string, gate: Child, url: string, victimKey: string, env: Record<string, string>): Promise<Phase> {
  const flood = spawnChild('bench/workers/flood.ts', { URL: url, CLIENTS: String(FLOOD_CLIENTS), DURATION_MS: String(PHASE_MS), ...env });
  await flood.line('ready');
  const [{ times, counts }, cpuUs] = await withCpu(
    gate,
    async () => {
      flood.send('go');
      const times = await victim(url, victimKey, PHASE_MS);
      const counts = (await flood.line('done', PHASE_MS + 60_000)).split(' ').map(Number);
      return { times, counts };
    },
    (r) => r.times.length + r.counts[0]! + r.counts[1]! + r.counts[2]!,
  );
  await flood.stop();
  const [ok, refused, other, ms] = counts;
  const perSecond = (n: number) => n / (ms! / 1000);
  return {
    name,
    times,
    later: times.afterFirstSecond,
    opening: times.firstSecond,
    cpuUs,
    flood: { ok: perSecond(ok!), refused: perSecond(refused!), other: perSecond(other!) },
  };
}

/** The gateway's settings: the default bounds; the same with refusals answered at once (no hold); no bounds. */
type Setting = 'defaults' | 'defaults, unheld' | 'off';

async function measure(server: BenchServer, bounds: Setting): Promise<Phase[]> {
  const db = await server.createDatabase('jobgate_bench_bounds');
  try {
    await migrate(db.url);
    const gate = spawnChild('bench/workers/http-server.ts', {
      SERVER: 'jobgate',
      DATABASE_URL: db.url,
      KEYS: '3',
      ...(bounds === 'off' ? { BOUNDS: 'off' } : {}),
      ...(bounds === 'defaults, unheld' ? { REFUSAL_HOLD_MS: '0' } : {}),
      ...(process.env.IN_FLIGHT ? { IN_FLIGHT: process.env.IN_FLIGHT } : {}),
    });
    try {
      const [url, flooder, other, warmer] = (await gate.line('ready', 60_000)).split(' ') as [string, string, string, string];
      await Promise.all([victim(url, other, WARMUP_MS), createJobs(url, warmer, WARMUP_CREATES)]);
      const [times, cpuUs] = await withCpu(
        gate,
        () => victim(url, other, PHASE_MS),
        (t) => t.length,
      );
      const quiet: Phase = { name: 'quiet', times, later: times.afterFirstSecond, opening: times.firstSecond, cpuUs };
      const oneKey = await underFlood('one key flooding createJob', gate, url, other, { KEY: flooder });
      const random = await underFlood('made-up keys flooding', gate, url, other, { RANDOM: '1' });
      return [quiet, oneKey, random];
    } finally {
      await gate.stop();
    }
  } finally {
    await db.drop();
  }
}

export async function run(): Promise<Figure[]> {
  const server = await openServer();
  const figures: Figure[] = [];
  try {
    const only = process.env.BENCH_BOUNDS_ONLY;
    for (const bounds of (['defaults', 'defaults, unheld', 'off'] as const).filter((b) => !only || b === only)) {
      const phases = await measure(server, bounds);
      const system = `jobgate, bounds ${bounds}`;
      const quietP99 = quantile(phases[0]!.times, 0.99);
      for (const phase of phases) {
        const bench = `bounds: another key's reads (${VICTIM_RATE}/s), ${phase.name}`;
        figures.push({ bench, system, value: quantile(phase.times, 0.5), unit: 'ms p50' });
        figures.push({ bench, system, value: quantile(phase.times, 0.99), unit: 'ms p99' });
        if (phase.cpuUs !== undefined) figures.push({ bench, system, value: phase.cpuUs, unit: 'µs gateway CPU per request answered' });
        if (!phase.flood) continue;
        figures.push({ bench, system, value: quantile(phase.times, 0.99) / quietP99, unit: 'x quiet p99 (goal with bounds: < 2)' });
        figures.push({ bench, system, value: quantile(phase.later, 0.99) / quietP99, unit: "x quiet p99, after the flood's first second" });
        figures.push({ bench, system, value: phase.opening.at(-1)!, unit: "ms, the slowest read sent in the flood's first second" });
        figures.push({ bench, system, value: phase.flood.ok, unit: 'flood answered 200/s' });
        figures.push({ bench, system, value: phase.flood.refused, unit: 'flood answered 429/s' });
        figures.push({ bench, system, value: phase.flood.other, unit: 'flood answered otherwise (401)/s' });
      }
    }
  } finally {
    await server.close();
  }
  return figures;
}

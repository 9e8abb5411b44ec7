/**
 * Node's default process metrics (prom-client's `collectDefaultMetrics`: CPU, memory, event-loop
 * lag, GC), collected once per process into one registry shared by every Metrics of the process,
 * and stopped when the last of them closes.
 *
 * Why shared and counted: each `collectDefaultMetrics` call starts an event-loop delay monitor
 * (`monitorEventLoopDelay`, sampling every 10 ms) and a GC `PerformanceObserver`, and prom-client
 * offers no way to stop either. Called per Metrics, an application (or a test file) that opens and
 * closes Jobgates kept one more of each running per open, for the life of the process. The two
 * monitors are caught as they are made (the `perf_hooks` functions are wrapped for the duration
 * of the one synchronous call) so that the last release can stop them; the metrics themselves
 * describe the process, so one copy serves every registry.
 */
import perfHooks from 'node:perf_hooks';
import { collectDefaultMetrics, Registry } from 'prom-client';

interface Monitors {
  registry: Registry;
  stop(): void;
}

let shared: Monitors | undefined;
let users = 0;

function start(): Monitors {
  const registry = new Registry();
  const delays: { disable(): boolean }[] = [];
  const observers: { disconnect(): void }[] = [];
  const monitor = perfHooks.monitorEventLoopDelay;
  const Observer = perfHooks.PerformanceObserver;
  const mutable = perfHooks as { monitorEventLoopDelay: typeof monitor; PerformanceObserver: typeof Observer };
  mutable.monitorEventLoopDelay = (...args) => {
    const histogram = monitor(...args);
    delays.push(histogram);
    return histogram;
  };
  mutable.PerformanceObserver = class extends Observer {
    constructor(callback: ConstructorParameters<typeof Observer>[0]) {
      super(callback);
      observers.push(this);
    }
  };
  try {
    collectDefaultMetrics({ register: registry });
  } finally {
    mutable.monitorEventLoopDelay = monitor;
    mutable.PerformanceObserver = Observer;
  }
  return {
    registry,
    stop() {
      for (const d of delays) d.disable();
      for (const o of observers) o.disconnect();
    },
  };
}

/** The process metrics' registry, for one more user; `release` (once) when done with it. */
export function acquireProcessMetrics(): { registry: Registry; release(): void } {
  shared ??= start();
  users++;
  const { registry } = shared;
  let released = false;
  return {
    registry,
    release() {
      if (released) return;
      released = true;
      if (--users > 0 || !shared) return;
      shared.stop();
      shared = undefined;
    },
  };
}

/** How many Metrics hold the process metrics now (0: no monitor running). For tests. */
export function processMetricsUsers(): number {
  return users;
}

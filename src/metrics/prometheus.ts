/**
 * The Prometheus adapter: an Observer (src/service/kernel/observer.ts) that counts into a registry of
 * its own, plus gauges read at scrape time (the pool, the hub, the queue). One per process, made
 * by the composition root (src/composition-root.ts); never prom-client's global registry, so several gateways
 * in one process (tests, an application embedding jobgate) each count only their own work.
 *
 * Naming follows Prometheus conventions: `jobgate_` prefix, `_total` for counters, `_seconds`
 * and base units. Label sets are bounded: endpoint names are capped (`endpointLabels`, the first
 * names this process sees; the rest share the series `_other`, which no endpoint can be named,
 * as names are dotted lowercase words), routes are a fixed set, no id is ever a label.
 *
 * Endpoint series are by endpoint name, summed over workspaces (one name in two workspaces is one
 * series), on purpose: workspaces are unbounded in number and a workspace label would multiply
 * every endpoint series by it, past any cap an operator could set. The cap stays one number of
 * series whatever the tenants; per-workspace figures are the API's (`executionStats`).
 *
 * Queue and run gauges describe the whole installation (they are read from the database), so
 * every process reports the same values: aggregate them with `max`, not `sum`. They are read
 * with one grouped query (`snapshot`, src/service/ops/probes.ts), at most once per `snapshotTtlMs`
 * (5 s) whatever the number of scrapers, in the background of the scrape that finds the last
 * read old.
 *
 * Node's default process metrics are shared by every Metrics of the process and stopped when the
 * last one closes (./process.ts).
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Observer } from '../service/kernel/observer.js';
import type { ClusterSnapshot } from '../service/ops/probes.js';
import { acquireProcessMetrics } from './process.js';

export const OTHER_ENDPOINTS = '_other';

export interface MetricsSources {
  /** The process's pool: connections total, idle, and callers waiting for one. */
  pool?: pg.Pool | undefined;
  /** Live subscriptions open on this process's hub. */
  subscriptions?: (() => number) | undefined;
  /** Attempts running in this process's worker. */
  attemptsInFlight?: (() => number) | undefined;
  /** Reads the installation's queue and live runs (the `jobgate_executions` and `jobgate_runs` gauges); without it, no such gauges. */
  snapshot?: (() => Promise<ClusterSnapshot>) | undefined;
}

export interface MetricsOptions extends MetricsSources {
  /** Most endpoint names with series of their own. Default 100. */
  endpointLabels?: number;
  /** How long the queue and run gauges' database read is reused. Default 5 s. */
  snapshotTtlMs?: number;
  /** Node's default process metrics (CPU, memory, event loop lag, GC). Default true, false with a `registry` given. */
  processMetrics?: boolean;
  /** Count into this registry (an application's own) instead of a new one. */
  registry?: Registry | undefined;
}

export interface Metrics {
  observer: Observer;
  registry: Registry;
  /** The exposition, in the Prometheus text format. */
  render(): Promise<string>;
  contentType: string;
  /** Stops what counting started (the process metrics' monitors, when this was their last user). */
  close(): void;
}

/** Endpoint names as label values: the first `max` seen keep theirs, the rest share `_other`. */
export class EndpointLabels {
  private readonly seen = new Set<string>();
  constructor(private readonly max: number) {}
  of(name: string): string {
    if (this.seen.has(name)) return name;
    if (this.seen.size >= this.max) return OTHER_ENDPOINTS;
    this.seen.add(name);
    return name;
  }
}

// Attempts: from a millisecond no-op handler to a slow HTTP target (the default timeout is 30 s).
// Ten buckets each: per-endpoint histograms are most of the exposition's size and rendering time.
const DURATION_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 10, 30, 120];
// Start delays: a worker idle on LISTEN starts in ~2 ms; a backlog can take minutes.
const DELAY_BUCKETS = [0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120, 600, 3600];
// Cron lateness: a scheduler polls every second; a misfire is past 60 s.
const LATENESS_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600];
/** What a reconciled execution became: retried after backoff, failed (its last attempt), or cancelled (as asked). */
const EXPIRY_OUTCOME: Record<string, string> = { PENDING: 'retried', FAILED: 'failed', CANCELLED: 'cancelled' };
const HTTP_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

// eslint-disable-next-line max-lines-per-function -- one declaration per metric and the observer calls that move them, read top to bottom as the catalogue of what jobgate exports
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = options.registry ?? new Registry();
  const registers = [registry];
  const endpoints = new EndpointLabels(options.endpointLabels ?? 100);
  const ttl = options.snapshotTtlMs ?? 5_000;
  const processMetrics = (options.processMetrics ?? options.registry === undefined) ? acquireProcessMetrics() : undefined;

  const finished = new Counter({
    name: 'jobgate_executions_finished_total',
    help: 'Executions finished, by endpoint and final status (SUCCEEDED, FAILED, CANCELLED): outcomes a worker recorded, and pending executions an operator cancelled.',
    labelNames: ['endpoint', 'outcome'],
    registers,
  });
  const retried = new Counter({
    name: 'jobgate_execution_retries_total',
    help: 'Attempts that ended in a scheduled retry, by endpoint.',
    labelNames: ['endpoint'],
    registers,
  });
  const attemptDuration = new Histogram({
    name: 'jobgate_attempt_duration_seconds',
    help: 'Duration of attempts run by this process, by endpoint.',
    labelNames: ['endpoint'],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const attempts = new Counter({
    name: 'jobgate_attempts_total',
    help: 'Attempts ended in this process, by endpoint and attempt outcome (SUCCEEDED, FAILED, TIMED_OUT, LEASE_EXPIRED, CANCELLED).',
    labelNames: ['endpoint', 'outcome'],
    registers,
  });
  const startDelay = new Histogram({
    name: 'jobgate_execution_start_delay_seconds',
    help: "Time from an execution becoming due (created, its delay passed, or its retry's backoff over) to an attempt starting, by endpoint.",
    labelNames: ['endpoint'],
    buckets: DELAY_BUCKETS,
    registers,
  });
  const leaseExpiries = new Counter({
    name: 'jobgate_lease_expiries_total',
    help: "Executions whose lease expired (their worker died or stalled), ended by this process's reconciler: retried, failed (it was the last attempt) or cancelled (a cancellation was asked).",
    labelNames: ['outcome'],
    registers,
  });
  const reconciles = new Counter({ name: 'jobgate_reconciles_total', help: 'Reconcile passes this process ran.', registers });
  const leasesLost = new Counter({
    name: 'jobgate_leases_lost_total',
    help: 'Attempts this process aborted because their lease was taken over.',
    registers,
  });
  const conflictRetries = new Counter({
    name: 'jobgate_conflict_retries_total',
    help: "Statements aborted by a conflict with another transaction and tried again (outcomes: a worker's outcome batch; heartbeat; mutation: a service transaction, whole), by SQLSTATE (40P01 deadlock, 40001 serialization).",
    labelNames: ['statement', 'sqlstate'],
    registers,
  });
  const lateness = new Histogram({
    name: 'jobgate_cron_tick_lateness_seconds',
    help: 'How late cron occurrences fired by this process were, after their scheduled time.',
    buckets: LATENESS_BUCKETS,
    registers,
  });
  const misfires = new Counter({
    name: 'jobgate_cron_misfires_total',
    help: 'Cron occurrences missed (misfire policy) when this process caught up.',
    registers,
  });
  const skipped = new Counter({
    name: 'jobgate_cron_skipped_ticks_total',
    help: 'Cron occurrences skipped (overlap policy, a held lock key).',
    registers,
  });
  const checkpoints = new Counter({
    name: 'jobgate_run_checkpoints_total',
    help: 'Checkpoints stored by recoverable runs in this process.',
    registers,
  });
  const delivered = new Counter({
    name: 'jobgate_live_events_delivered_total',
    help: 'Events and findings handed to live subscribers by this process.',
    registers,
  });
  const slowCut = new Counter({
    name: 'jobgate_live_slow_consumers_total',
    help: 'Live subscribers cut off for reading nothing while events waited (SLOW_CONSUMER).',
    registers,
  });
  const reconnects = new Counter({
    name: 'jobgate_listen_reconnects_total',
    help: 'Times a LISTEN connection of this process listened again after losing its connection, by connection.',
    labelNames: ['connection'],
    registers,
  });
  const pollFallbacks = new Counter({
    name: 'jobgate_listen_polling_fallbacks_total',
    help: 'Times a LISTEN connection of this process fell back to polling (connection lost, or notifications not arriving), by connection.',
    labelNames: ['connection'],
    registers,
  });
  const graphql = new Counter({
    name: 'jobgate_graphql_operations_total',
    help: 'GraphQL operations executed, by operation type (query, mutation, subscription) and outcome (ok, error).',
    labelNames: ['type', 'outcome'],
    registers,
  });
  const httpRequests = new Counter({
    name: 'jobgate_http_requests_total',
    help: 'HTTP requests answered, by route and status code.',
    labelNames: ['route', 'code'],
    registers,
  });
  const pruned = new Counter({
    name: 'jobgate_retention_pruned_rows_total',
    help: 'Rows of finished history that retention deleted in this process, by table (executions, attempts, audit_log, runs, findings, events, jobs, alert_notifications, batches).',
    labelNames: ['table'],
    registers,
  });
  const abandonedTicks = new Counter({
    name: 'jobgate_interval_ticks_abandoned_total',
    help: 'Interval ticks this process abandoned: their handler ignored its signal through the grace after its timeout, so the slot was freed while it ran on. By handler.',
    labelNames: ['handler'],
    registers,
  });
  const abandonedRunning = new Gauge({
    name: 'jobgate_interval_abandoned_running',
    help: 'Abandoned interval handlers still running in this process, by handler. Above 0: a handler that does not stop when asked.',
    labelNames: ['handler'],
    registers,
  });
  const runDuePasses = new Counter({
    name: 'jobgate_run_due_passes_total',
    help: 'Serverless passes (POST /jobs/run-due, runDue()) this process ran, by outcome (ok, error).',
    labelNames: ['outcome'],
    registers,
  });
  const runDueExecutions = new Counter({
    name: 'jobgate_run_due_executions_total',
    help: 'Executions run by the serverless passes of this process, by what they were left as (succeeded, failed, retrying, cancelled).',
    labelNames: ['outcome'],
    registers,
  });
  const httpDuration = new Histogram({
    name: 'jobgate_http_request_duration_seconds',
    help: 'Time to answer HTTP requests (to the last byte; a subscription over SSE counts its whole stream), by route.',
    labelNames: ['route'],
    buckets: HTTP_BUCKETS,
    registers,
  });

  const { pool } = options;
  if (pool) {
    new Gauge({
      name: 'jobgate_db_pool_connections',
      help: "Connections of this process's pool, by state (total, idle).",
      labelNames: ['state'],
      registers,
      collect() {
        this.set({ state: 'total' }, pool.totalCount);
        this.set({ state: 'idle' }, pool.idleCount);
      },
    });
    new Gauge({
      name: 'jobgate_db_pool_waiting',
      help: "Callers waiting for a connection of this process's pool.",
      registers,
      collect() {
        this.set(pool.waitingCount);
      },
    });
  }
  const { subscriptions, attemptsInFlight } = options;
  if (subscriptions) {
    new Gauge({
      name: 'jobgate_live_subscriptions',
      help: 'Live subscriptions open on this process.',
      registers,
      collect() {
        this.set(subscriptions());
      },
    });
  }
  if (attemptsInFlight) {
    new Gauge({
      name: 'jobgate_worker_attempts_in_flight',
      help: "Executions this process's worker holds (attempts running, or ended and being recorded).",
      registers,
      collect() {
        this.set(attemptsInFlight());
      },
    });
  }

  const readSnapshot = options.snapshot;
  if (readSnapshot) {
    // One read for both gauges, reused for `ttl`: scrapers (and processes) add no database load
    // past one grouped query every few seconds. A scrape never waits for that query but the first
    // one: an older read is served while the next one runs (values are at most `ttl` plus one
    // query old). A read that fails drops the gauges until one succeeds, rather than show old values.
    let current: ClusterSnapshot | undefined;
    let readAt = -Infinity;
    let reading: Promise<void> | undefined;
    const snapshotFailures = new Counter({
      name: 'jobgate_metrics_snapshot_failures_total',
      help: 'Reads of the queue and run gauges that failed (the database unreachable): those gauges are absent until one succeeds.',
      registers,
    });
    const snapshot = async (): Promise<ClusterSnapshot | undefined> => {
      if (!reading && performance.now() - readAt >= ttl) {
        readAt = performance.now();
        reading = readSnapshot().then(
          (s) => void (current = s),
          () => {
            snapshotFailures.inc();
            current = undefined;
          },
        );
        void reading.finally(() => (reading = undefined));
      }
      if (!current) await reading;
      return current;
    };
    new Gauge({
      name: 'jobgate_executions',
      help: 'Executions of the whole installation by endpoint and state: pending (due or not), due (pending and due: waiting for a worker, a slot or a turn), running. The same from every process: aggregate with max.',
      labelNames: ['endpoint', 'state'],
      registers,
      async collect() {
        this.reset();
        const snap = await snapshot();
        if (!snap) return;
        const sums = new Map<string, { pending: number; due: number; running: number }>();
        for (const row of snap.queue) {
          const label = endpoints.of(row.endpoint);
          const sum = sums.get(label) ?? { pending: 0, due: 0, running: 0 };
          sum.pending += row.pending;
          sum.due += row.due;
          sum.running += row.running;
          sums.set(label, sum);
        }
        for (const [endpoint, sum] of sums) {
          this.set({ endpoint, state: 'pending' }, sum.pending);
          this.set({ endpoint, state: 'due' }, sum.due);
          this.set({ endpoint, state: 'running' }, sum.running);
        }
      },
    });
    new Gauge({
      name: 'jobgate_executions_waiting',
      help: 'Pending executions of the whole installation by endpoint and the reason each waits (its waitingFor: ENDPOINT_PAUSED, JOB_PAUSED, PREREQUISITES, NOT_DUE, RETRY_BACKOFF, ENDPOINT_RETRY_AFTER, PREVIOUS_OCCURRENCE, ENDPOINT_CONCURRENCY_FULL, WORKSPACE_CONCURRENCY_FULL, KEY_CONCURRENCY_FULL, RATE_LIMITED, KEY_RATE_LIMITED, NO_LIVE_WORKER, READY). The same from every process: aggregate with max.',
      labelNames: ['endpoint', 'reason'],
      registers,
      async collect() {
        this.reset();
        const snap = await snapshot();
        if (!snap) return;
        for (const row of snap.waiting) this.inc({ endpoint: endpoints.of(row.endpoint), reason: row.reason }, row.count);
      },
    });
    new Gauge({
      name: 'jobgate_runs',
      help: 'Unfinished recoverable runs of the whole installation, by status (RUNNING, CANCEL_REQUESTED, PAUSED). The same from every process: aggregate with max.',
      labelNames: ['status'],
      registers,
      async collect() {
        this.reset();
        const snap = await snapshot();
        if (!snap) return;
        for (const status of ['RUNNING', 'CANCEL_REQUESTED', 'PAUSED'])
          this.set({ status }, snap.runs.find((r) => r.status === status)?.count ?? 0);
      },
    });
  }

  const observer: Observer = {
    attemptStarted(endpoint, waitedSeconds) {
      startDelay.observe({ endpoint: endpoints.of(endpoint) }, Math.max(0, waitedSeconds));
    },
    attemptEnded(endpoint, outcome, seconds) {
      const label = endpoints.of(endpoint);
      attemptDuration.observe({ endpoint: label }, seconds);
      attempts.inc({ endpoint: label, outcome });
    },
    executionRecorded(endpoint, status) {
      if (status === 'PENDING') retried.inc({ endpoint: endpoints.of(endpoint) });
      else finished.inc({ endpoint: endpoints.of(endpoint), outcome: status });
    },
    pendingCancelled(endpoint, count) {
      if (count > 0) finished.inc({ endpoint: endpoints.of(endpoint), outcome: 'CANCELLED' }, count);
    },
    runDuePass(outcome, executions) {
      runDuePasses.inc({ outcome });
      for (const [state, n] of Object.entries(executions ?? {})) if (n > 0) runDueExecutions.inc({ outcome: state }, n);
    },
    leasesReconciled(expired) {
      reconciles.inc();
      for (const row of expired) leaseExpiries.inc({ outcome: EXPIRY_OUTCOME[row.status] ?? 'failed' });
    },
    leaseLost: () => leasesLost.inc(),
    conflictRetried: (statement, sqlstate) => conflictRetries.inc({ statement, sqlstate }),
    historyPruned(rows) {
      for (const [table, n] of Object.entries(rows)) if (n > 0) pruned.inc({ table }, n);
    },
    intervalTickAbandoned(handler) {
      abandonedTicks.inc({ handler });
      abandonedRunning.inc({ handler });
    },
    intervalAbandonedSettled: (handler) => abandonedRunning.dec({ handler }),
    cronFired(latenessSeconds, missed, skippedTicks) {
      for (const s of latenessSeconds) lateness.observe(Math.max(0, s));
      if (missed > 0) misfires.inc(missed);
      if (skippedTicks > 0) skipped.inc(skippedTicks);
    },
    runCheckpointed: () => checkpoints.inc(),
    eventsDelivered: (count) => delivered.inc(count),
    slowConsumerCut: () => slowCut.inc(),
    listenReconnected: (who) => reconnects.inc({ connection: who }),
    listenFellBackToPolling: (who) => pollFallbacks.inc({ connection: who }),
    graphqlOperation: (type, outcome) => graphql.inc({ type, outcome }),
    httpRequest(route, status, seconds) {
      httpRequests.inc({ route, code: String(status) });
      httpDuration.observe({ route }, seconds);
    },
  };

  // The process metrics' registry is rendered after this one's: both are text, one exposition.
  const render = processMetrics
    ? async () => (await registry.metrics()) + (await processMetrics.registry.metrics())
    : () => registry.metrics();
  return { observer, registry, render, contentType: registry.contentType, close: () => processMetrics?.release() };
}

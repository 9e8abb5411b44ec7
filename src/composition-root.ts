/**
 * The one composition root: builds jobgate's engine (pool, service, internal handlers, workers
 * with their scheduler, engine host and pruner, the live hub, the serverless pass, the observer
 * and its metrics) from one options object with one set of defaults (./defaults.ts). The CLI
 * (src/app.ts: start, serve, worker, run-due), the gateway it serves and the library
 * (src/index.ts: createJobgate) all build theirs here, so they cannot wire it differently.
 * Adapters call the service it returns, never a repository.
 */
import type { Registry } from 'prom-client';
import { describeApplied, migrate, verifyMigrated } from './db/migrate.js';
import { createDatabase, type Database } from './db/pool.js';
import { barredEndpoints } from './service/endpoints/config-secrets.js';
import { sessions } from './db/pooler.js';
import { openReadReplica, type ReadReplica } from './db/read-replica.js';
import { ENGINE_DEFAULTS, type EngineDefaults } from './defaults.js';
import type { Logger } from './log.js';
import { createMetrics, type Metrics } from './metrics/prometheus.js';
import type { AlertEmailOptions } from './service/engine/alerts/alert-handlers.js';
import { createAvailability, waitForDatabase, type Availability } from './service/engine/runtime/availability.js';
import { HandlerRegistry } from './service/engine/delivery/handler-registry.js';
import { createEngineHost, type EngineHost } from './service/engine/runtime/host.js';
import { IntervalRegistry } from './service/engine/intervals/intervals.js';
import { registerInternalHandlers } from './service/engine/maintenance/reaper.js';
import { RecoverableRegistry } from './service/engine/runs/recoverable.js';
import { createPruner, type PrunedBatch, type Pruner } from './service/engine/maintenance/pruner.js';
import { runDuePass, type RunDueDeps, type RunDueResult } from './service/engine/serverless/run-due.js';
import { createCronJobScheduler, type CronJobScheduler } from './service/engine/cron/scheduler.js';
import { createWorker, type Worker, type WorkerOptions } from './service/engine/worker/worker.js';
import { createJobService, type JobService, type ServiceDeps } from './service/index.js';
import { noopObserver, type Observer } from './service/kernel/observer.js';
import { createDatabaseProbes, type DatabaseProbes, type ListenMode } from './service/ops/probes.js';
import type { RetentionSettingsDefaults } from './service/retention/windows.js';
import { type SecretBox } from './service/kernel/secrets.js';
import { inOrder, settled } from './shutdown.js';
import { createHub, type Hub } from './subscriptions/hub/hub.js';

/** Metrics: off, on (a registry of its own), or counted into an application's registry. */
export type MetricsSetting = boolean | Registry | { registry?: Registry; endpointLabels?: number; processMetrics?: boolean };

export interface EngineOptions {
  /** Postgres connection string: the server itself, or a pooler in front of it (then say which in `pooler`). */
  connectionString: string;
  /**
   * `transaction`: the connection string is a transaction-mode pooler (PgBouncer with
   * pool_mode=transaction), which gives each transaction whatever server connection is free. Then
   * statements go unnamed unless `preparedStatements` says the pooler tracks them, and LISTEN
   * (which needs a session) connects only to `listenConnectionString`: without one, workers and
   * the live hub poll. Default: none, a direct connection or a session-mode pool.
   */
  pooler?: 'transaction' | undefined;
  /** Where the LISTEN connections go: a session on the server itself. Default the connection string, unless it is a transaction pooler. */
  listenConnectionString?: string | undefined;
  /**
   * A streaming replica of the database for reads that may be slightly stale: lists, counts and
   * stats of callers that allow it (a GraphQL query), while it holds every commit older than
   * `maxLagMs` (src/db/read-replica.ts). Unset: every read is the primary's.
   */
  readReplica?: { connectionString: string; maxLagMs: number } | undefined;
  /** Named statements, prepared once per connection. Default on, off with a transaction pooler (PgBouncer 1.21+ with max_prepared_statements can keep them). */
  preparedStatements?: boolean | undefined;
  log: Logger;
  /** `apply` pending migrations (under the migration lock), or only `verify` they are applied. Default apply. */
  migrations?: 'apply' | 'verify';
  /** The pool's application_name, as Postgres shows it. */
  applicationName?: string | undefined;
  poolMax?: number | undefined;
  poolWaitMs?: number | undefined;
  defaultMaxAttempts?: number | undefined;
  /** How long before its time the scheduler writes a cron job's next occurrence; 0 at its time. Default 30 s. */
  cronLeadMs?: number | undefined;
  secrets?: SecretBox | undefined;
  /** CIDRs endpoints may target although the outbound policy refuses them, checked at registration (workers take `worker.outboundAllow`). */
  outboundAllow?: string[] | undefined;
  alertEmail?: AlertEmailOptions | undefined;
  /** The installation's retention windows and the pruner's pace; `prune: false` runs no pruner beside workers. */
  retention?: Partial<RetentionSettingsDefaults & EngineDefaults['retention']> & { prune?: boolean | undefined };
  /** Called with each committed batch of pruned history (besides the metrics). */
  onPruned?: ((batch: PrunedBatch) => void) | undefined;
  /** Defaults of the workers started here (each `startWorker` may override them). */
  worker?: Partial<EngineDefaults['worker']>;
  metrics?: MetricsSetting | undefined;
  /** What this process will run, for the gauges it has (a gateway alone has no worker gauge). Default workers only. */
  roles?: { hub?: boolean; workers?: boolean } | undefined;
  /** Ends the wait for an unreachable database during start-up (it then rejects with the signal's reason). */
  signal?: AbortSignal | undefined;
  /** Registries to run from (a caller that registered handlers before opening); default new ones. */
  handlers?: HandlerRegistry | undefined;
  recoverables?: RecoverableRegistry | undefined;
  intervals?: IntervalRegistry | undefined;
  /** The process's view of its database, when the caller made it before (to log the start-up wait once). */
  availability?: Availability | undefined;
}

/** A worker's options as callers give them; the engine fills in the rest. */
export type EngineWorkerOptions = Omit<WorkerOptions, 'pool' | 'connectionString' | 'handlers' | 'log' | 'availability'> & {
  /** Engine host: a process silent this long is gone from the catalogue. Default 30 s. */
  staleMs?: number;
  /** Engine host: how often recoverable runs, interval ticks and run schedules are looked for. Default 1 s. */
  enginePollMs?: number;
};

export interface Engine {
  database: Database;
  service: JobService;
  /** What the service was built with (for `createJobServiceIn`). */
  serviceDeps: Omit<ServiceDeps, 'db' | 'pool'>;
  handlers: HandlerRegistry;
  recoverables: RecoverableRegistry;
  intervals: IntervalRegistry;
  availability: Availability;
  observer: Observer;
  /** The Prometheus adapter, when metrics are on. */
  metrics: Metrics | undefined;
  /** What `/readyz` and the gauges read of the database. */
  probes: DatabaseProbes;
  /** The engine's LISTEN connections and their mode now, for `/readyz`. */
  listeners(): { name: string; mode: () => ListenMode | undefined }[];
  /** Waits for the database like the start-up wait (an outage said once), or rejects on the signal. */
  reach<T>(what: string, attempt: () => Promise<T>): Promise<T>;
  /**
   * Starts a worker; the first also starts, once per engine, the cron scheduler, the engine host
   * (recoverable runs, interval handlers, run schedules, the catalogue entry) and the pruner.
   */
  startWorker(options?: EngineWorkerOptions): Promise<Worker>;
  /** One serverless pass (POST /jobs/run-due, `gate.runDue()`), counted by the observer. */
  runDue(options?: { limit?: number; defaultTimeoutMs?: number; outboundAllow?: string[] }): Promise<RunDueResult>;
  /** The live hub (LISTEN/NOTIFY fan-out) for a gateway, started on first call. */
  startHub(): Promise<Hub>;
  /** Stops the hub, the scheduler, the workers (within `graceMs`), the host and the pruner, then the pool and the metrics. */
  stop(options?: { graceMs?: number }): Promise<void>;
}

function metricsOptions(setting: MetricsSetting | undefined) {
  if (setting === undefined || setting === false) return undefined;
  if (setting === true) return {};
  if ('getMetricsAsJSON' in setting) return { registry: setting as Registry };
  return setting;
}

/** What the engine's parts share once the database is open. */
interface Opened {
  options: EngineOptions;
  database: Database;
  replica: ReadReplica | undefined;
  service: JobService;
  serviceDeps: Omit<ServiceDeps, 'db' | 'pool'>;
  metrics: Metrics | undefined;
  probes: DatabaseProbes;
  availability: Availability;
  reach: Engine['reach'];
  defaults: EngineDefaults['worker'];
  retention: RetentionSettingsDefaults & EngineDefaults['retention'];
  /** Filled in as they start; the gauges read them. */
  running: { workers: Worker[]; hub?: Hub | undefined };
}

/**
 * Opens the engine: waits for the database (migrations applied or verified), builds the pool and
 * the service, checks the default workspace exists, registers the internal handlers. Starts no
 * loop: callers start workers and the hub. On failure everything opened is closed.
 */
export async function openEngine(options: EngineOptions): Promise<Engine> {
  const { log } = options;
  const availability = options.availability ?? createAvailability(log);
  const reach = <T>(what: string, attempt: () => Promise<T>) => waitForDatabase(availability, what, attempt, options.signal);
  if (options.migrations === 'verify') await reach('checking migrations', () => verifyMigrated(options.connectionString));
  else {
    const { applied } = await reach('migrations', () => migrate(options.connectionString, { log: (m) => log.debug(m) }));
    log.info(describeApplied(applied));
  }
  const database = createDatabase(
    {
      connectionString: options.connectionString,
      max: options.poolMax ?? ENGINE_DEFAULTS.poolMax,
      connectionTimeoutMs: options.poolWaitMs ?? ENGINE_DEFAULTS.poolWaitMs,
      applicationName: options.applicationName,
      preparedStatements: sessions(options).preparedStatements,
      startupOptions: sessions(options).startupOptions,
    },
    (m) => log.warn(m),
  );
  void warnOfBarredEndpoints(database, log);
  const retention = { ...ENGINE_DEFAULTS.retention, ...options.retention };
  const serviceDeps: Omit<ServiceDeps, 'db' | 'pool'> = {
    defaultMaxAttempts: options.defaultMaxAttempts ?? ENGINE_DEFAULTS.defaultMaxAttempts,
    secrets: options.secrets,
    outboundAllow: options.outboundAllow,
    retention,
  };
  const running: Opened['running'] = { workers: [] };
  const probes = createDatabaseProbes(database.pool);
  const metricsSetting = metricsOptions(options.metrics);
  // One registry per engine unless the application gives its own: several in one process count apart.
  const metrics = metricsSetting
    ? createMetrics({
        ...metricsSetting,
        pool: database.pool,
        snapshot: probes.clusterSnapshot,
        subscriptions: options.roles?.hub ? () => running.hub?.stats().open ?? 0 : undefined,
        attemptsInFlight: options.roles?.workers === false ? undefined : () => running.workers.reduce((n, w) => n + w.inFlight(), 0),
      })
    : undefined;
  const replica = options.readReplica
    ? openReadReplica({
        connectionString: options.readReplica.connectionString,
        maxLagMs: options.readReplica.maxLagMs,
        primary: database.pool,
        poolMax: options.poolMax ?? ENGINE_DEFAULTS.poolMax,
        preparedStatements: sessions({ ...options, connectionString: options.readReplica.connectionString }).preparedStatements,
        startupOptions: sessions({ ...options, connectionString: options.readReplica.connectionString }).startupOptions,
        log: (m) => log.warn(m),
      })
    : undefined;
  const service = createJobService({ ...serviceDeps, replica, observer: metrics?.observer, db: database.db, pool: database.pool });
  try {
    await reach('start-up', () => service.workspaceIdOf('default'));
  } catch (error) {
    // The caller gets no engine to stop: close the pool here, or it holds the process open.
    metrics?.close();
    await replica?.close();
    await database.close();
    throw error;
  }
  const defaults = { ...ENGINE_DEFAULTS.worker, ...options.worker, outboundAllow: [...(options.worker?.outboundAllow ?? [])] };
  return assemble({ options, database, replica, service, serviceDeps, metrics, probes, availability, reach, defaults, retention, running });
}

function assemble(opened: Opened): Engine {
  const { options, database, metrics, running, defaults } = opened;
  const { log } = options;
  const observer = metrics?.observer ?? noopObserver;
  const pool = database.pool;
  const pruned = (batch: PrunedBatch) => {
    observer.historyPruned(batch.rows);
    options.onPruned?.(batch);
  };
  const handlers = options.handlers ?? new HandlerRegistry();
  // jobgate's own internal handlers (the reaper, the alert evaluator and sender), registered once,
  // whichever runs first: a worker, or a serverless pass.
  registerInternalHandlers(handlers, pool, { alerts: options.alertEmail });
  const registries = {
    handlers,
    recoverables: options.recoverables ?? new RecoverableRegistry(),
    intervals: options.intervals ?? new IntervalRegistry(),
  };
  const loops = createLoops(opened, registries, observer, pruned);
  // Workers started here without an id of their own.
  let named = 0;
  let passScheduler: CronJobScheduler | undefined;
  return {
    database,
    service: opened.service,
    serviceDeps: opened.serviceDeps,
    ...registries,
    availability: opened.availability,
    observer,
    metrics,
    probes: opened.probes,
    // A process told to poll (a transaction pooler, no LISTEN URL) has no listener to wait for.
    listeners: () => listenersOf(opened),
    reach: opened.reach,
    async startWorker({ staleMs, enginePollMs, ...workerOptions } = {}) {
      const hostId = await loops.start(staleMs, enginePollMs);
      // The process's id, as its row among the workers says it (src/service/engine/runtime/host.ts),
      // so that an attempt's worker is found there; a second worker in the process gets `/2`.
      const workerId = workerOptions.workerId ?? (++named === 1 ? hostId : `${hostId}/${named}`);
      const worker = createWorker(workerSettings(opened, handlers, observer, { ...workerOptions, workerId }));
      await worker.start();
      running.workers.push(worker);
      return worker;
    },
    runDue({ limit, defaultTimeoutMs, outboundAllow } = {}) {
      // Not started: its loop is for long-running processes; a pass calls its tick once.
      passScheduler ??= createCronJobScheduler({ pool, log });
      const deps = {
        pool,
        handlers,
        scheduler: passScheduler,
        defaultTimeoutMs: defaultTimeoutMs ?? defaults.defaultTimeoutMs,
        outboundAllow: outboundAllow ?? [...defaults.outboundAllow],
        secrets: options.secrets,
        // The pass holds off reconciling leases during and just after an outage, as a worker does.
        availability: opened.availability,
        leaseMs: defaults.leaseMs,
        prune: runDuePruning(opened, pruned),
      };
      return countedRunDue(observer, () => runDuePass(deps, { limit }));
    },
    async startHub() {
      if (!running.hub) {
        running.hub = createHub({ pool, connectionString: sessions(options).listen, log, observer });
        await running.hub.start();
      }
      return running.hub;
    },
    async stop({ graceMs } = {}) {
      const grace = graceMs ?? defaults.shutdownGraceMs;
      // Every step runs even when one before it failed: the pool is always closed.
      await inOrder([
        () => running.hub?.stop(),
        () => loops.stopScheduler(),
        () => settled([...running.workers.splice(0).map((w) => w.stop({ graceMs: grace })), ...loops.stopRest(grace)]),
        () => opened.replica?.close(),
        () => database.close(),
        () => metrics?.close(),
      ]);
    },
  };
}

/**
 * How often a worker with no LISTEN connection by design (a transaction pooler, no LISTEN URL)
 * looks for work, instead of the 5 s fallback of one whose notifications stopped: this is its only
 * way to learn of work created elsewhere, so it bounds that work's wait for a free worker. One claim
 * statement a second per worker (a few hundred microseconds of the database's time) is its cost.
 */
export const POLL_WITHOUT_LISTEN_MS = 1_000;

/** The engine's LISTEN connections, for /readyz; none when it polls by design (a transaction pooler, no LISTEN URL). */
function listenersOf({ options, running }: Opened): ReturnType<Engine['listeners']> {
  if (sessions(options).listen === null) return [];
  return [
    ...(running.workers.length ? [{ name: 'worker listener', mode: () => running.workers[0]?.listenMode() }] : []),
    ...(running.hub ? [{ name: 'live listener', mode: () => running.hub?.listener.mode }] : []),
  ];
}

/** A worker's settings: the engine's defaults, what the caller gave, and the engine's shared parts. */
function workerSettings(opened: Opened, handlers: HandlerRegistry, observer: Observer, given: Partial<WorkerOptions>): WorkerOptions {
  const { options, defaults } = opened;
  const leaseMs = given.leaseMs ?? defaults.leaseMs;
  return {
    concurrency: defaults.concurrency,
    // 0: the concurrency (the worker's own default).
    ...(defaults.batchSize > 0 ? { batchSize: defaults.batchSize } : {}),
    leaseMs,
    // At most a third of the lease, whichever lease this worker was given (as config clamps it).
    heartbeatMs: Math.min(defaults.heartbeatMs, Math.floor(leaseMs / 3)),
    defaultTimeoutMs: defaults.defaultTimeoutMs,
    outboundAllow: [...defaults.outboundAllow],
    ...(sessions(options).listen === null ? { pollMs: POLL_WITHOUT_LISTEN_MS } : {}),
    ...given,
    secrets: options.secrets,
    pool: opened.database.pool,
    connectionString: sessions(options).listen,
    handlers,
    log: options.log,
    availability: opened.availability,
    observer: given.observer ?? observer,
  };
}

/** The slice of retention a serverless pass prunes after its other work (none with `prune: false`). */
function runDuePruning(opened: Opened, onPruned: (batch: PrunedBatch) => void): RunDueDeps['prune'] {
  const { options, retention } = opened;
  if (options.retention?.prune === false) return undefined;
  return {
    log: options.log,
    defaults: retention,
    batchSize: retention.batchSize,
    pauseMs: retention.pauseMs,
    maxBatches: retention.runDueBatches,
    onPruned,
  };
}

/** The loops beside a process's workers, started with the first one: the cron scheduler, the engine host and the pruner. */
function createLoops(
  opened: Opened,
  registries: Pick<Engine, 'handlers' | 'recoverables' | 'intervals'>,
  observer: Observer,
  onPruned: (batch: PrunedBatch) => void,
) {
  const { options, availability, retention, running } = opened;
  const { log } = options;
  const pool = opened.database.pool;
  let scheduler: CronJobScheduler | undefined;
  let host: EngineHost | undefined;
  let pruner: Pruner | undefined;
  return {
    /** Starts them (once), and answers the engine host's id: the process's row among the workers. */
    async start(staleMs: number | undefined, pollMs: number | undefined): Promise<string> {
      if (!scheduler) {
        const leadMs = options.cronLeadMs ?? ENGINE_DEFAULTS.cronLeadMs;
        (scheduler = createCronJobScheduler({ pool, log, availability, observer, leadMs })).start();
      }
      if (host) return host.id;
      host = createEngineHost({
        pool,
        log,
        ...registries,
        triggerRun: opened.service.triggerRun,
        staleMs,
        pollMs,
        availability,
        observer,
        goneWorkersMs: retention.goneWorkersHours * 3_600_000,
      });
      await host.start(options.signal);
      // Retention: prunes finished history beside the other loops (src/service/engine/maintenance/pruner.ts).
      if (options.retention?.prune !== false)
        (pruner = createPruner({
          pool,
          log,
          id: host.id,
          defaults: retention,
          batchSize: retention.batchSize,
          pauseMs: retention.pauseMs,
          everyMs: retention.everyMs,
          // Pruning slows down while this process's workers are behind their queue, so it takes
          // less from a drain; it prunes at its full pace once they catch up.
          busy: () => running.workers.some((w) => w.backlogged()),
          onPruned,
          availability,
        })).start();
      return host.id;
    },
    stopScheduler: () => scheduler?.stop(),
    stopRest: (graceMs: number) => [host?.stop({ graceMs }), pruner?.stop()],
  };
}

/** A serverless pass, reported: the leases it reconciled, and the pass with what it ran (or its failure). */
async function countedRunDue(observer: Observer, pass: () => Promise<RunDueResult>): Promise<RunDueResult> {
  let result: RunDueResult;
  try {
    result = await pass();
  } catch (error) {
    observer.runDuePass('error');
    throw error;
  }
  const { retrying, failed, cancelled } = result.reconciled;
  const lapsed = (status: string, n: number) => Array.from({ length: n }, () => ({ status }));
  observer.leasesReconciled([...lapsed('PENDING', retrying), ...lapsed('FAILED', failed), ...lapsed('CANCELLED', cancelled)]);
  const { succeeded, failed: failedRuns, retrying: retried, cancelled: cancelledRuns } = result.executions;
  observer.runDuePass('ok', { succeeded, failed: failedRuns, retrying: retried, cancelled: cancelledRuns });
  return result;
}

/**
 * Says, at start, which endpoints will not get their config's secrets (endpointsBarredFromSecrets):
 * their deliveries fail with "a secret this endpoint may not send" until an ADMIN updates them. A
 * database upgraded from before the rule can hold such endpoints, whose requests carried the secret.
 */
async function warnOfBarredEndpoints(database: Database, log: Logger): Promise<void> {
  try {
    const barred = await barredEndpoints(database.db, 11);
    if (barred.length === 0) return;
    const names = barred.slice(0, 10);
    log.warn(
      `endpoints that may not send their config's secrets (their url, headers or config were last set by an OPERATOR key that did not write them): ` +
        `${names.join(', ')}${barred.length > 10 ? ', and more' : ''}. Their requests fail until an ADMIN updates each (its url, as it is, will do), ` +
        'or they are pointed at another config (docs/security.md)',
    );
  } catch {
    // A start is not held up by a warning it could not read.
  }
}

/**
 * One jobgate process: database (embedded or external), migrations, service, gateway. The CLI
 * runs this; tests start it in child processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './config.js';
import { openDatabaseSource, type DatabaseSource } from './db/connect.js';
import { migrate } from './db/migrate.js';
import { createDatabase, type Database } from './db/pool.js';
import type { Logger } from './log.js';
import { startGateway, type RunningGateway } from './server/gateway.js';
import { runDuePass } from './service/engine/run-due.js';
import { HandlerRegistry } from './service/engine/handlers.js';
import { createAvailability, waitForDatabase } from './service/engine/availability.js';
import { createEngineHost, type EngineHost } from './service/engine/host.js';
import { IntervalRegistry } from './service/engine/intervals.js';
import { RecoverableRegistry } from './service/engine/recoverable.js';
import { registerInternalHandlers } from './service/engine/reaper.js';
import { createCronJobScheduler, type CronJobScheduler } from './service/engine/cron-job-scheduler.js';
import { createWorker, type Worker } from './service/engine/worker.js';
import { createPruner, eventsBatch, type Pruner, type PrunedBatch } from './service/engine/retention.js';
import { createJobService, NotFoundError } from './service/index.js';
import { createHub, type Hub } from './subscriptions/hub.js';
import { createLiveFeeds } from './subscriptions/live.js';
import { SecretBox } from './service/secrets.js';
import { inOrder, settled, turnNotReady } from './shutdown.js';
import { createMetrics, type Metrics } from './metrics/prometheus.js';
import { createHealth, type Health } from './server/health.js';
import { startOpsServer, type OpsRoutes, type OpsServer } from './server/ops-routes.js';

export interface RunningApp {
  url: string;
  /** Where /metrics, /healthz and /readyz are served besides the gateway (JOBGATE_METRICS_PORT); '' when not. */
  opsUrl: string;
  connectionString: string;
  stop(): Promise<void>;
  /** Resolves when the app must stop on its own (its embedded database went away). */
  lost: Promise<void>;
}

function bearer(header: string | null): string | undefined {
  const match = /^Bearer\s+(\S+)$/i.exec(header ?? '');
  return match?.[1];
}

/** The embedded default's key for secrets at rest: generated once, kept in the data folder (0600). */
function embeddedSecretKey(dataDir: string): string {
  const file = path.join(dataDir, 'secret-key');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    const key = SecretBox.generateText();
    fs.writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
    return key;
  }
}

export interface AppRoles {
  /** Serve the GraphQL gateway. */
  gateway: boolean;
  /** Run a worker (executions of HTTP endpoints and the handlers in `handlers`). */
  worker: boolean;
}

export async function startApp(
  config: Config,
  log: Logger,
  roles: AppRoles = { gateway: true, worker: true },
  handlers: HandlerRegistry = new HandlerRegistry(),
  recoverables: RecoverableRegistry = new RecoverableRegistry(),
  intervals: IntervalRegistry = new IntervalRegistry(),
  /** Ends the wait for an unreachable database during start-up (a signal arrived meanwhile). */
  signal?: AbortSignal,
  /** Called with each committed batch of pruned history (metrics). */
  onPruned?: (batch: PrunedBatch) => void,
): Promise<RunningApp> {
  const source: DatabaseSource = await openDatabaseSource(config, log);
  // One view of the database for all the process's loops: an outage is logged once, and one at
  // start-up (the database not reachable yet) is waited for and said the same way.
  const availability = createAvailability(log);
  const reach = <T>(what: string, attempt: () => Promise<T>) => waitForDatabase(availability, what, attempt, signal);
  let database: Database | undefined;
  let gateway: RunningGateway | undefined;
  let worker: Worker | undefined;
  let scheduler: CronJobScheduler | undefined;
  let hub: Hub | undefined;
  let host: EngineHost | undefined;
  let health: Health | undefined;
  let opsServer: OpsServer | undefined;
  let pruner: Pruner | undefined;
  const stop = async () => {
    // Turn not-ready first (and keep serving for JOBGATE_SHUTDOWN_DELAY_MS, while load balancers
    // notice), then stop taking requests and firing, let the worker drain within its grace period
    // (its /readyz, on the metrics port, answering 503 meanwhile), then the database. Every step
    // runs even when one before it failed (the database unreachable, say): the pool is closed and
    // an embedded server stopped, not left running behind the process.
    await inOrder([
      // The delay lets load balancers see the 503; a process that never served waits for nothing.
      () => turnNotReady(health, gateway || opsServer ? config.shutdownDelayMs : 0),
      () => gateway?.close(),
      () => hub?.stop(),
      () => scheduler?.stop(),
      () =>
        settled([
          worker?.stop({ graceMs: config.worker.shutdownGraceMs }),
          host?.stop({ graceMs: config.worker.shutdownGraceMs }),
          pruner?.stop(),
        ]),
      () => opsServer?.close(),
      () => database?.close(),
      () => source.stop(),
    ]);
  };
  try {
    const { applied } = await reach('migrations', () => migrate(source.connectionString, { log: (m) => log.info(m) }));
    if (applied.length === 0) log.info('migrations: up to date');
    database = createDatabase(
      { connectionString: source.connectionString, max: config.poolMax, connectionTimeoutMs: config.poolWaitMs },
      (m) => log.warn(m),
    );
    const secretKey = config.secretKey ?? (source.embedded ? embeddedSecretKey(config.dataDir) : undefined);
    if (!secretKey) log.warn('JOBGATE_SECRET_KEY is not set: signing secrets and secret config values cannot be stored');
    const secrets = secretKey ? SecretBox.fromText(secretKey) : undefined;
    const retention = { ...config.retention, eventsHours: config.eventRetentionMs / 3_600_000 };
    const service = createJobService({
      db: database.db,
      pool: database.pool,
      defaultMaxAttempts: config.defaultMaxAttempts,
      secrets,
      outboundAllow: config.worker.outboundAllow,
      retention,
    });
    // One registry per app (never prom-client's global one): several apps in one process count apart.
    const metrics: Metrics = createMetrics({
      pool: database.pool,
      endpointLabels: config.metrics.endpointLabels,
      subscriptions: roles.gateway ? () => hub?.stats().open ?? 0 : undefined,
      attemptsInFlight: roles.worker ? () => worker?.inFlight() ?? 0 : undefined,
    });
    const observer = metrics.observer;
    const pruned = (batch: PrunedBatch) => {
      observer.historyPruned(batch.rows);
      onPruned?.(batch);
    };
    health = createHealth({
      pool: database.pool,
      listeners: [
        ...(roles.worker ? [{ name: 'worker listener', mode: () => worker?.listenMode() }] : []),
        ...(roles.gateway ? [{ name: 'live listener', mode: () => hub?.listener.mode }] : []),
      ],
    });
    const ops: OpsRoutes = { health, metrics, metricsToken: config.metrics.token, log };
    if (config.metrics.port !== undefined) {
      opsServer = await startOpsServer(ops, config.host, config.metrics.port);
      log.info(`metrics: /healthz, /readyz${config.metrics.token ? ' and /metrics' : ''} at ${opsServer.url}`);
    }
    await reach('start-up', () => service.workspaceIdOf('default')).catch((error: unknown) => {
      throw error instanceof NotFoundError
        ? new Error('the default workspace is missing; the database was not migrated by jobgate')
        : error;
    });
    registerInternalHandlers(handlers, database.pool, {
      eventRetentionMs: config.eventRetentionMs,
      alerts: config.alerts,
      onEventsPruned: (workspaceId, n) => pruned(eventsBatch(workspaceId, n)),
    });
    if (roles.worker) {
      scheduler = createCronJobScheduler({ pool: database.pool, log, availability, observer });
      scheduler.start();
      worker = createWorker({
        pool: database.pool,
        connectionString: source.connectionString,
        handlers,
        log,
        concurrency: config.worker.concurrency,
        leaseMs: config.worker.leaseMs,
        heartbeatMs: config.worker.heartbeatMs,
        defaultTimeoutMs: config.worker.defaultTimeoutMs,
        outboundAllow: config.worker.outboundAllow,
        secrets,
        availability,
        observer,
      });
      await worker.start();
      // Recoverable runs (and their crash sweep), interval handlers, run schedules and this
      // worker's entry in the handler catalogue. jobgate's own process registers no recoverable
      // or interval handler, but runs the machinery: the sweep and the catalogue still apply.
      host = createEngineHost({
        pool: database.pool,
        log,
        handlers,
        recoverables,
        intervals,
        triggerRun: service.triggerRun,
        availability,
        observer,
      });
      await host.start(signal);
      // Retention: prunes finished history beside the other loops (src/service/engine/retention.ts).
      (pruner = createPruner({
        pool: database.pool,
        log,
        id: host.id,
        defaults: retention,
        ...config.retention,
        onPruned: pruned,
        availability,
      })).start();
    }
    if (source.embedded && !(await service.anyApiKey())) {
      // First start of the embedded default: a key so the new user can use GraphiQL at once.
      const { key } = await service.bootstrapKey('default', 'ADMIN', 'bootstrap admin (first start)', true);
      const file = path.join(config.dataDir, 'admin-key');
      fs.writeFileSync(file, key + '\n', { mode: 0o600 });
      log.info(`access: created the first ADMIN key; it is shown once here and saved in ${file}:\n\n    ${key}\n`);
    }
    if (roles.gateway) {
      const pool = database.pool;
      const runScheduler = createCronJobScheduler({ pool, log });
      hub = createHub({ pool, connectionString: source.connectionString, log, observer });
      await hub.start();
      gateway = await startGateway({
        service,
        live: createLiveFeeds(service, hub),
        authenticate: (request) => service.authenticate(bearer(request.headers.get('authorization'))),
        log,
        host: config.host,
        port: config.port,
        introspection: config.introspection,
        corsOrigins: config.corsOrigins,
        maxBodyBytes: config.maxBodyBytes,
        observer,
        ops,
        runDue: config.cronSecret
          ? {
              secret: config.cronSecret,
              log,
              run: async () => ({
                ...(await runDuePass({
                  pool,
                  handlers,
                  scheduler: runScheduler,
                  defaultTimeoutMs: config.worker.defaultTimeoutMs,
                  outboundAllow: config.worker.outboundAllow,
                  secrets,
                  availability,
                  leaseMs: config.worker.leaseMs,
                })),
              }),
            }
          : undefined,
      });
      log.info(`gateway: GraphQL and GraphiQL at ${gateway.url}`);
    }
    return { url: gateway?.url ?? '', opsUrl: opsServer?.url ?? '', connectionString: source.connectionString, stop, lost: source.lost };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

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
import { findWorkspaceBySlug } from './db/repos/workspaces.js';
import type { Logger } from './log.js';
import { startGateway, type RunningGateway } from './server/gateway.js';
import { runDuePass } from './service/engine/run-due.js';
import { HandlerRegistry } from './service/engine/handlers.js';
import { createAvailability } from './service/engine/availability.js';
import { createEngineHost, type EngineHost } from './service/engine/host.js';
import { IntervalRegistry } from './service/engine/intervals.js';
import { RecoverableRegistry } from './service/engine/recoverable.js';
import { registerInternalHandlers } from './service/engine/reaper.js';
import { createScheduler, type Scheduler } from './service/engine/scheduler.js';
import { createWorker, type Worker } from './service/engine/worker.js';
import { createPruner, eventsBatch, type Pruner, type PrunedBatch } from './service/engine/retention.js';
import { createJobService } from './service/index.js';
import { createHub, type Hub } from './subscriptions/hub.js';
import { createLiveFeeds } from './subscriptions/live.js';
import { SecretBox } from './service/secrets.js';
import { inOrder, settled } from './shutdown.js';

export interface RunningApp {
  url: string;
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
  /** Called with each committed batch of pruned history (metrics). */
  onPruned?: (batch: PrunedBatch) => void,
): Promise<RunningApp> {
  const source: DatabaseSource = await openDatabaseSource(config, log);
  let database: Database | undefined;
  let gateway: RunningGateway | undefined;
  let worker: Worker | undefined;
  let scheduler: Scheduler | undefined;
  let hub: Hub | undefined;
  let host: EngineHost | undefined;
  let pruner: Pruner | undefined;
  const stop = async () => {
    // Stop taking requests and firing, let the worker drain within its grace period, then the
    // database. Every step runs even when one before it failed (the database unreachable, say):
    // the pool is closed and an embedded server stopped, not left running behind the process.
    await inOrder([
      () => gateway?.close(),
      () => hub?.stop(),
      () => scheduler?.stop(),
      () => settled([worker?.stop({ graceMs: config.worker.shutdownGraceMs }), host?.stop({ graceMs: config.worker.shutdownGraceMs }), pruner?.stop()]),
      () => database?.close(),
      () => source.stop(),
    ]);
  };
  try {
    const { applied } = await migrate(source.connectionString, { log: (m) => log.info(m) });
    if (applied.length === 0) log.info('migrations: up to date');
    database = createDatabase({ connectionString: source.connectionString, max: config.poolMax, connectionTimeoutMs: config.poolWaitMs }, (m) => log.warn(m));
    const secretKey = config.secretKey ?? (source.embedded ? embeddedSecretKey(config.dataDir) : undefined);
    if (!secretKey) log.warn('JOBGATE_SECRET_KEY is not set: signing secrets and secret config values cannot be stored');
    const secrets = secretKey ? SecretBox.fromText(secretKey) : undefined;
    const retention = { ...config.retention, eventsHours: config.eventRetentionMs / 3_600_000 };
    const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: config.defaultMaxAttempts, secrets, retention });
    const ws = await findWorkspaceBySlug(database.db, 'default');
    if (!ws) throw new Error('the default workspace is missing; the database was not migrated by jobgate');
    registerInternalHandlers(handlers, database.pool, {
      eventRetentionMs: config.eventRetentionMs,
      alerts: config.alerts,
      onEventsPruned: (workspaceId, n) => onPruned?.(eventsBatch(workspaceId, n)),
    });
    if (roles.worker) {
      // One view of the database for all the worker's loops: an outage is logged once.
      const availability = createAvailability(log);
      scheduler = createScheduler({ pool: database.pool, log, availability });
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
      });
      await worker.start();
      // Recoverable runs (and their crash sweep), interval handlers, run schedules and this
      // worker's entry in the handler catalogue. jobgate's own process registers no recoverable
      // or interval handler, but runs the machinery: the sweep and the catalogue still apply.
      host = createEngineHost({ pool: database.pool, log, handlers, recoverables, intervals, triggerRun: service.triggerRun, availability });
      await host.start();
      // Retention: prunes finished history beside the other loops (src/service/engine/retention.ts).
      (pruner = createPruner({ pool: database.pool, log, id: host.id, defaults: retention, ...config.retention, onPruned, availability })).start();
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
      const runScheduler = createScheduler({ pool, log });
      hub = createHub({ pool, connectionString: source.connectionString, log });
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
                })),
              }),
            }
          : undefined,
      });
      log.info(`gateway: GraphQL and GraphiQL at ${gateway.url}`);
    }
    return { url: gateway?.url ?? '', connectionString: source.connectionString, stop, lost: source.lost };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

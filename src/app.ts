/**
 * One jobgate process: database (embedded or external), migrations, service, gateway. The CLI
 * runs this; tests start it in child processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { openEngine, type Engine, type EngineOptions } from './composition-root.js';
import type { Config } from './environment.js';
import { openDatabaseSource, type DatabaseSource } from './db/connect.js';
import type { Logger } from './log.js';
import { bearerToken } from './server/bearer.js';
import { startGateway, type RunningGateway } from './server/gateway.js';
import type { HandlerRegistry } from './service/engine/delivery/handler-registry.js';
import { createAvailability } from './service/engine/runtime/availability.js';
import type { IntervalRegistry } from './service/engine/intervals/intervals.js';
import type { RecoverableRegistry } from './service/engine/runs/recoverable.js';
import type { PrunedBatch } from './service/engine/maintenance/pruner.js';
import { createLiveFeeds } from './subscriptions/live-feeds.js';
import { NotFoundError } from './service/kernel/errors.js';
import { SecretBox } from './service/kernel/secrets.js';
import { inOrder, turnNotReady } from './shutdown.js';
import { createHealth } from './server/health.js';
import { startOpsServer, type OpsRoutes, type OpsServer } from './server/ops-routes.js';
import { trustedProxyCheck } from './server/client-address.js';
import { DEMO_HANDLER_NAMES, DEMO_RECOVERABLE_NAMES, registerDemoHandlers } from './service/engine/demo/demo-handlers.js';

export interface RunningApp {
  url: string;
  /** Where /metrics, /healthz and /readyz are served besides the gateway (JOBGATE_METRICS_PORT); '' when not. */
  opsUrl: string;
  connectionString: string;
  stop(): Promise<void>;
  /**
   * Stops the embedded database now, beside a stop in progress, without waiting for its drain
   * (a second signal): what runs is cut off, and its leases expire. Nothing for a database of
   * DATABASE_URL. The process exits after it.
   */
  stopNow(): Promise<void>;
  /** Resolves when the app must stop on its own (its embedded database went away). */
  lost: Promise<void>;
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

export interface StartAppOptions {
  /** The environment's settings (src/environment.ts): database, ports, worker, metrics, retention. */
  config: Config;
  /** Where the process's log lines go. */
  log: Logger;
  /** Which roles this process takes. Default both: gateway and worker (`jobgate start`). */
  roles?: AppRoles | undefined;
  /** In-process handlers of this process's workers, besides jobgate's own (tests register some). */
  handlers?: HandlerRegistry | undefined;
  /** Recoverable handlers this process's workers run (tests register some); none when unset. */
  recoverables?: RecoverableRegistry | undefined;
  /** Interval handlers this process's workers run (tests register some); none when unset. */
  intervals?: IntervalRegistry | undefined;
  /** Ends the wait for an unreachable database during start-up (a signal arrived meanwhile). */
  startupSignal?: AbortSignal | undefined;
  /** Called with each committed batch of pruned history (metrics). */
  onPruned?: ((batch: PrunedBatch) => void) | undefined;
}

/**
 * Starts one jobgate process with the roles asked for; on a failure during start, what was
 * started is stopped again before the error is thrown.
 */
export async function startApp(options: StartAppOptions): Promise<RunningApp> {
  const { config, log, roles = { gateway: true, worker: true }, handlers, recoverables, intervals, startupSignal, onPruned } = options;
  // Probes answer from the first moment: /healthz 200, /readyz 503 "waiting for database" until
  // the database is reached and migrated (an orchestrator must not restart a process that waits).
  const health = createHealth({});
  const ops: OpsRoutes = { health, metrics: undefined, metricsToken: config.metrics.token, log };
  let opsServer: OpsServer | undefined;
  let early: OpsServer | undefined;
  let source: DatabaseSource | undefined;
  let engine: Engine | undefined;
  let gateway: RunningGateway | undefined;
  const stop = async () => {
    // Turn not-ready first (and keep serving for JOBGATE_SHUTDOWN_DELAY_MS, while load balancers
    // notice), then stop taking requests, let the engine drain within its grace period (/readyz,
    // on the metrics port, answering 503 meanwhile), then the database. Every step runs even when
    // one before it failed (the database unreachable, say): the pool is closed and an embedded
    // server stopped, not left running behind the process.
    await inOrder([
      // The delay lets load balancers see the 503; a process that never served waits for nothing.
      () => turnNotReady(health, gateway || opsServer ? config.shutdownDelayMs : 0),
      () => gateway?.close(),
      () => early?.close(),
      () => engine?.stop({ graceMs: config.worker.shutdownGraceMs }),
      () => opsServer?.close(),
      () => source?.stop(),
    ]);
  };
  try {
    if (config.metrics.port !== undefined) {
      opsServer = await startOpsServer(ops, config.host, config.metrics.port, { setting: 'JOBGATE_METRICS_PORT' });
      log.info(`metrics: /healthz, /readyz${config.metrics.token ? ' and /metrics' : ''} at ${opsServer.url}`);
    }
    // The gateway's port too: its probes answer during the wait; everything else is 503 until the
    // gateway takes the listening socket over.
    if (roles.gateway)
      early = await startOpsServer(ops, config.host, config.port, {
        starting: true,
        connections: {
          connectionsPerAddress: config.bounds.connectionsPerAddress,
          isTrustedProxy: trustedProxyCheck(config.trustedProxies),
          log,
        },
      });
    source = await openDatabaseSource(config, log);
    const demo = config.demoHandlers && roles.worker ? registerDemoHandlers(handlers, recoverables) : { handlers, recoverables };
    if (config.demoHandlers && roles.worker) {
      log.info(
        `demo handlers: ${[...DEMO_HANDLER_NAMES, ...DEMO_RECOVERABLE_NAMES].join(', ')} (JOBGATE_DEMO_HANDLERS=off turns them off)`,
      );
    }
    engine = await openEngine({
      ...engineOptions(config, source, log),
      roles: { hub: roles.gateway, workers: roles.worker },
      onPruned,
      signal: startupSignal,
      handlers: demo.handlers,
      recoverables: demo.recoverables,
      intervals,
    }).catch((error: unknown) => {
      throw error instanceof NotFoundError
        ? new Error('the default workspace is missing; the database was not migrated by jobgate')
        : error;
    });
    ops.metrics = engine.metrics;
    if (roles.worker) await engine.startWorker();
    if (source.embedded && !(await engine.service.anyApiKey())) await saveFirstAdminKey(engine, config.dataDir, log);
    if (early) {
      const listening = early.takeOver();
      early = undefined;
      // Not the gateway's yet if building it fails: closed here, or its port stays bound.
      gateway = await serveGateway(engine, config, log, ops, listening).catch((error: unknown) => {
        listening.close();
        listening.closeAllConnections();
        throw error;
      });
    }
    health.databaseReached(engine.probes, engine.listeners());
    return {
      url: gateway?.url ?? '',
      opsUrl: opsServer?.url ?? '',
      connectionString: source.connectionString,
      stop,
      stopNow: async () => source?.stop(),
      lost: source.lost,
    };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

/** The engine as the environment configures it (src/environment.ts). */
function engineOptions(config: Config, source: DatabaseSource, log: Logger): EngineOptions {
  const secretKey = config.secretKey ?? (source.embedded ? embeddedSecretKey(config.dataDir) : undefined);
  if (!secretKey) log.warn('JOBGATE_SECRET_KEY is not set: signing secrets and secret config values cannot be stored');
  return {
    connectionString: source.connectionString,
    // The embedded default is Postgres itself, whatever the environment says of DATABASE_URL.
    ...(source.embedded
      ? {}
      : {
          pooler: config.pooler,
          listenConnectionString: config.listenDatabaseUrl,
          preparedStatements: config.preparedStatements,
          readReplica: config.readReplica,
        }),
    log,
    migrations: config.migrations,
    poolMax: config.poolMax,
    poolWaitMs: config.poolWaitMs,
    defaultMaxAttempts: config.defaultMaxAttempts,
    cronLeadMs: config.cronLeadMs,
    secrets: secretKey ? SecretBox.fromText(secretKey) : undefined,
    outboundAllow: config.worker.outboundAllow,
    alertEmail: config.alerts,
    retention: { ...config.retention, eventsHours: config.eventRetentionMs / 3_600_000 },
    worker: config.worker,
    metrics: { endpointLabels: config.metrics.endpointLabels },
    // One view of the database for all the process's loops: an outage is logged once, and one
    // at start-up (the database not reachable yet) is waited for and said the same way.
    availability: createAvailability(log),
  };
}

/**
 * The embedded default's first start: an ADMIN key, so the new user can use GraphiQL at once.
 * Saved in the data folder (0600), and shown on stderr only when a person is looking (a
 * terminal), outside the logger: a JSON log line is what log shippers keep, and a key in it would
 * live on in every place the logs go. The log line names the file, never the key.
 */
async function saveFirstAdminKey(engine: Engine, dataDir: string, log: Logger): Promise<void> {
  const { key } = await engine.service.bootstrapKey('default', 'ADMIN', 'bootstrap admin (first start)', true);
  const file = path.join(dataDir, 'admin-key');
  fs.writeFileSync(file, key + '\n', { mode: 0o600 });
  log.info(`access: created the first ADMIN key and saved it in ${file} (readable by this user only)`);
  if (process.stderr.isTTY) process.stderr.write(`\n    The first ADMIN key (shown once here; also in ${file}):\n\n    ${key}\n\n`);
}

async function serveGateway(
  engine: Engine,
  config: Config,
  log: Logger,
  ops: OpsRoutes,
  listening: OpsServer['server'],
): Promise<RunningGateway> {
  const { service } = engine;
  const gateway = await startGateway({
    service,
    live: createLiveFeeds(service, await engine.startHub()),
    authenticate: (request) => service.authenticate(bearerToken(request.headers.get('authorization'))),
    log,
    host: config.host,
    port: config.port,
    listening,
    introspection: config.introspection,
    corsOrigins: config.corsOrigins,
    persisted: { only: config.persistedOnly, manifests: config.persistedDocuments },
    maxBodyBytes: config.maxBodyBytes,
    keepAliveMs: config.wsKeepAliveMs,
    bounds: config.bounds,
    trustedProxies: config.trustedProxies,
    // Only where the engine has the replica: never on the embedded default.
    replicaReads: config.readReplica && config.databaseUrl ? { windowMs: config.readReplica.maxLagMs } : undefined,
    observer: engine.observer,
    ops,
    runDue: config.cronSecret ? { secret: config.cronSecret, log, run: async () => ({ ...(await engine.runDue()) }) } : undefined,
  });
  log.info(`gateway: GraphQL and GraphiQL at ${gateway.url}`);
  return gateway;
}

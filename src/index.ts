/**
 * Library entry: the same job service the gateway uses, in process.
 *
 *   import { createJobgate } from 'jobgate';
 *   const gate = await createJobgate({ databaseUrl: process.env.DATABASE_URL });
 *   const { job } = await gate.client.createJob({ endpointName: 'billing.send-invoice', kind: 'IMMEDIATE', input: {...} });
 */
import type { z, ZodType } from 'zod';
import type { Registry } from 'prom-client';
import { openEngine, type MetricsSetting } from './composition-root.js';
import { defineJob, type DefineJobOptions, type JobDefinition } from './define-job.js';
import type { Database } from './db/pool.js';
import { createLogger, type Logger } from './log.js';
import type { HandlerFn } from './service/engine/delivery/handler-registry.js';
import { SecretBox } from './service/kernel/secrets.js';
import type { AlertEmailOptions } from './service/engine/alerts/alert-handlers.js';
import type { PrunerOptions } from './service/engine/maintenance/pruner.js';
import type { RetentionSettingsDefaults } from './service/retention/windows.js';
import type { IntervalHandler } from './service/engine/intervals/intervals.js';
import type { RecoverableHandler, RunRetry, RunSchedule } from './service/engine/runs/recoverable.js';
import type { RunDueResult } from './service/engine/serverless/run-due.js';
import type { Worker, WorkerOptions } from './service/engine/worker/worker.js';
import type { Actor, Role } from './service/kernel/actor.js';
import {
  createJobServiceIn,
  type DeclaredSchedule,
  type DeclaredScheduleInput,
  type DeclareSchedulesResult,
  type JobService,
  type OuterTransaction,
  type PruneHistoryInput,
  type PruneHistoryResult,
} from './service/index.js';

export interface JobgateOptions {
  /** Postgres connection string: the server itself, or a pooler in front of it (then say which in `pooler`). */
  databaseUrl: string;
  /**
   * `transaction` when `databaseUrl` is a transaction-mode pooler (PgBouncer pool_mode=transaction):
   * statements go unnamed (unless `preparedStatements`), and LISTEN connects only to
   * `listenDatabaseUrl`; without it, workers poll for work. See docs/operating.md, Through PgBouncer.
   */
  pooler?: 'transaction';
  /** Where the LISTEN connections go: a session on Postgres itself. Default `databaseUrl`, unless that is a transaction pooler. */
  listenDatabaseUrl?: string;
  /** Named statements prepared once per connection. Default on, off with `pooler: 'transaction'`. */
  preparedStatements?: boolean;
  /** Apply pending migrations first (under the migration lock). Default true. */
  migrate?: boolean;
  /** Max attempts when neither a job nor its endpoint sets one. Default 5. */
  defaultMaxAttempts?: number;
  /**
   * How long before its time a worker's scheduler writes a cron job's next occurrence (at most
   * 55 s; 0 writes each at its time). Default 30 s.
   */
  cronLeadMs?: number;
  /** Most connections to Postgres, at least 2. Default 10. */
  poolMax?: number;
  /** Longest wait for a pooled connection before the caller gets an error. Default 30 s. */
  poolWaitMs?: number;
  log?: Logger;
  /**
   * Key for secrets at rest (32 bytes, base64 or hex): endpoint signing secrets and secret config
   * values are stored encrypted with it. Without it, storing a secret is refused.
   */
  secretKey?: string;
  /**
   * CIDRs that HTTP endpoints may target although the outbound policy refuses them (as
   * JOBGATE_OUTBOUND_ALLOW): registering an endpoint whose url is a refused IP literal is
   * refused (VALIDATION_FAILED) unless it is allowed here. Workers take their own list.
   */
  outboundAllow?: string[];
  /** Email alerts from this process's workers: SMTP server, sender, default recipients (see docs/api-by-task.md, Alerts). */
  alertEmail?: AlertEmailOptions;
  /**
   * Ends the wait for an unreachable database while `createJobgate` starts (it then rejects with
   * the signal's reason). Without it, `createJobgate` waits for the database as long as it takes.
   */
  signal?: AbortSignal;
  /**
   * Retention (see docs/operating.md, Retention): the installation's windows, and the pace of the
   * pruner each started worker runs (`prune: false` runs none). Unset windows take the defaults.
   */
  retention?: Partial<RetentionSettingsDefaults> &
    Pick<PrunerOptions, 'batchSize' | 'pauseMs' | 'everyMs' | 'onPruned'> & {
      prune?: boolean;
      /** Pruning batches each `runDue()` runs at most, after its other work (default 4; 0: none). */
      runDueBatches?: number;
      /** Hours after which a worker gone (no heartbeat) is forgotten by the live ones (default 24). */
      goneWorkersHours?: number;
    };
  /**
   * Prometheus metrics of this Jobgate's workers and passes (the same as `jobgate worker` serves,
   * see docs/operating.md, Metrics): `true` counts into a registry of its own (`gate.metrics`), a
   * prom-client `Registry` counts into the application's (Node's process metrics are then left
   * to it); `{ registry?, endpointLabels?, processMetrics? }` to choose. Default off.
   */
  metrics?: MetricsSetting;
}

export type StartWorkerOptions = Omit<WorkerOptions, 'pool' | 'connectionString' | 'handlers' | 'log' | 'availability'> & {
  /**
   * This process is gone from the handler catalogue, its interval ticks are recorded as crashed
   * and its recoverable runs paused, after this long without a heartbeat. Default 30 s.
   */
  staleMs?: number;
  /** How often recoverable runs, interval ticks and run schedules are looked for. Default 1 s. */
  enginePollMs?: number;
};

/** The service with the actor argument already filled in. */
export type BoundService = {
  [K in keyof JobService]: JobService[K] extends (actor: Actor, ...args: infer A) => infer R ? (...args: A) => R : never;
};

/** Service functions that are not scoped to an actor (authentication and bootstrap). */
const UNSCOPED = new Set(['authenticate', 'redeemSubscriptionTicket', 'bootstrapKey', 'anyApiKey']);

export function bindActor(service: JobService, actor: Actor): BoundService {
  const bound: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(service)) {
    if (UNSCOPED.has(name)) continue;
    bound[name] = (...args: unknown[]) => (fn as (...a: unknown[]) => unknown)(actor, ...args);
  }
  return bound as BoundService;
}

export interface Jobgate {
  service: JobService;
  /** The service acting for the embedding application in the default workspace. */
  client: BoundService;
  /**
   * An actor for the embedding application in a workspace (by slug). `onBehalfOfKeyId` records
   * (and authorises) its changes as that API key's. Throws NOT_FOUND.
   */
  actor(workspaceSlug?: string, role?: Role, onBehalfOfKeyId?: string): Promise<Actor>;
  /** The service acting as `actor`. */
  as(actor: Actor): BoundService;
  /**
   * The service acting inside the caller's own open transaction: `tx` is a pg client on which
   * BEGIN was sent (a PoolClient, from any pool on the same database), or a Kysely `Transaction`.
   * Jobs, executions, runs, their audit rows and the wake-up notifications commit with the
   * caller's work or roll back with it (no trace). Every refusal (an idempotent repeat,
   * LOCK_HELD, VALIDATION_FAILED, CONFLICT, ...) leaves the caller's transaction usable: each
   * call runs in a savepoint. Calls on one transaction run one at a time. Acts as `actor`,
   * default the embedding application in the default workspace.
   */
  inTransaction(tx: OuterTransaction, actor?: Actor): BoundService;
  /**
   * Registers the in-process handler for HANDLER endpoints whose `handlerName` is `name`. With a
   * zod schema, input is parsed first and a mismatch fails the execution without retries.
   * Handlers run at least once per execution: make them idempotent.
   */
  handle<I = unknown>(name: string, schemaOrFn: ZodType<I> | HandlerFn<I>, fn?: HandlerFn<I>): void;
  /**
   * Defines a typed job: registers the in-process handler `name` (its input parsed by `schema`)
   * and makes its HANDLER endpoint `name` exist with a payload spec generated from `schema` (JSON
   * Schema), so GraphQL's createJob on it validates the same way. Idempotent (every replica may
   * define its jobs at start-up; a changed schema updates the spec). Returns `enqueue(input,
   * options)`, with `input` typed from the schema and `options.tx` the caller's transaction.
   */
  defineJob<S extends ZodType>(
    name: string,
    schema: S,
    handler: HandlerFn<z.output<S>>,
    options?: DefineJobOptions,
  ): Promise<JobDefinition<z.input<S>>>;
  /**
   * Registers a recoverable handler: a long scan that checkpoints through `store` and returns
   * `outcome.completed()`, `outcome.paused(cursor)` or `outcome.failed(message)`. Runs are
   * started with `triggerRun({ name, params })`, refused (NOT_FOUND) while no live worker has
   * the handler unless `force: true`; workers started here run them. With `schedule`
   * (`{ cron, timezone? }` or `{ everyMs }`, plus `params` and `workspace`), each tick calls
   * `triggerRun`: a tick that finds the run active starts nothing and is counted. A run whose
   * handler throws is retried from its last checkpoint with backoff, `retry.budget` times (default
   * 3) since its last progress; `store.transaction` commits a checkpoint with the handler's own writes.
   * With `alertsOptOut: true` no alert rule fires about its runs (failures, findings, no success).
   */
  recoverable<P = unknown>(
    name: string,
    handler: { params?: ZodType<P>; schedule?: RunSchedule; retry?: RunRetry; alertsOptOut?: boolean; run: RecoverableHandler<P>['run'] },
  ): void;
  /**
   * Registers an interval handler: plain periodic work, run every `everyMs` by one of the
   * workers that registered it (never two ticks at once: ticks due while one runs coalesce, and
   * the rest are counted as skipped). With `onDemand: true` instead of `everyMs` it has no
   * cadence and runs only when triggered: `client.triggerHandler({ name, wait: true })` runs it
   * now and answers with the tick's outcome. `ctx.signal` fires on timeout (`timeoutMs`, default
   * 60 s) and at shutdown; `ctx.force` is true for a tick triggered with `force` (skip your own
   * grace window). Return `{ count, extra }` (extra: any JSON, kept with the outcome) or a bare
   * count to report how much it did. A throw is recorded as the tick's error and never stops the
   * loop.
   */
  interval(name: string, handler: Omit<IntervalHandler, 'name'>): void;
  /**
   * Starts a worker in this process for HTTP endpoints and the handlers registered here, and
   * (once per Jobgate) beside it: the cron scheduler, the runner of recoverable handlers and their
   * schedules, interval handlers, and this process's entry in the handler catalogue.
   */
  startWorker(options?: StartWorkerOptions): Promise<Worker>;
  /**
   * Declares a cron schedule by name, for start-up code: creates the CRON job if missing, updates
   * it in place when the declaration changed (a new expression is an update, never a CONFLICT),
   * or leaves it as it is. `endpoint` names an endpoint; `handler` an in-process handler, whose
   * HANDLER endpoint (named after it) is registered if missing. Safe from many replicas at once.
   */
  schedule(name: string, spec: Omit<DeclaredScheduleInput, 'name'>, actor?: Actor): Promise<DeclaredSchedule>;
  /**
   * Declares a set of schedules in one transaction (see `schedule`); with `retireUndeclared`,
   * the workspace's declared schedules this set no longer names are retired.
   */
  schedules(
    specs: Record<string, Omit<DeclaredScheduleInput, 'name'>>,
    options?: { retireUndeclared?: boolean; actor?: Actor },
  ): Promise<DeclareSchedulesResult>;
  /**
   * One serverless pass, what POST /jobs/run-due does, for a route handler called by a platform
   * cron (Next.js, Hono, ...): expired leases are reconciled, due cron occurrences fire, and up to
   * `limit` (default 100) due executions run here, HTTP endpoints and the handlers registered on
   * this Jobgate, and a bounded slice of retention is pruned (`retention.runDueBatches` batches).
   * Safe concurrently with itself and with workers. No worker needs to be started.
   */
  runDue(options?: { limit?: number; defaultTimeoutMs?: number; outboundAllow?: string[] }): Promise<RunDueResult>;
  /**
   * Prunes the default workspace's (or `actor`'s) finished history now, to the windows in effect,
   * as the background pruner would, at most `maxBatches` batches (default 100); answers the rows
   * removed per table and whether it got through everything. Audited; needs an ADMIN actor.
   */
  prune(options?: PruneHistoryInput & { actor?: Actor }): Promise<PruneHistoryResult>;
  database: Database;
  /** The metrics (with `metrics` set): render() gives the Prometheus text exposition, e.g. for an application's own /metrics. */
  metrics?: { registry: Registry; render(): Promise<string>; contentType: string } | undefined;
  /** Stops workers started here (gracefully), then closes the pool. */
  close(): Promise<void>;
}

export async function createJobgate(options: JobgateOptions): Promise<Jobgate> {
  // A run schedule's tick holds one connection while it triggers the run on another.
  if (options.poolMax !== undefined && !(Number.isInteger(options.poolMax) && options.poolMax >= 2)) {
    throw new RangeError(`poolMax must be an integer of at least 2 (got ${options.poolMax})`);
  }
  const { onPruned, ...retention } = options.retention ?? {};
  // A database that cannot be reached yet is waited for (said once, and once when it answers),
  // like an outage later on; bad credentials, a missing database or refused migrations throw.
  const engine = await openEngine({
    connectionString: options.databaseUrl,
    pooler: options.pooler,
    listenConnectionString: options.listenDatabaseUrl,
    preparedStatements: options.preparedStatements,
    log: options.log ?? createLogger('warn'),
    migrations: options.migrate === false ? 'verify' : 'apply',
    applicationName: 'jobgate-library',
    poolMax: options.poolMax,
    poolWaitMs: options.poolWaitMs,
    defaultMaxAttempts: options.defaultMaxAttempts,
    cronLeadMs: options.cronLeadMs,
    secrets: options.secretKey ? SecretBox.fromText(options.secretKey) : undefined,
    outboundAllow: options.outboundAllow,
    alertEmail: options.alertEmail,
    retention,
    onPruned,
    metrics: options.metrics,
    signal: options.signal,
  });
  const { service, handlers, recoverables, intervals } = engine;
  const actor = async (slug = 'default', role: Role = 'ADMIN', onBehalfOfKeyId?: string): Promise<Actor> => {
    return { workspaceId: await service.workspaceIdOf(slug), kind: 'library', role, keyId: onBehalfOfKeyId };
  };
  const defaultActor = await actor().catch(async (error: unknown) => {
    await engine.stop();
    throw error;
  });
  const serviceIn = (tx: OuterTransaction) => createJobServiceIn(engine.serviceDeps, tx);
  const defined = new Set<string>();
  return {
    service,
    client: bindActor(service, defaultActor),
    actor,
    as: (a) => bindActor(service, a),
    inTransaction: (tx, a = defaultActor) => bindActor(serviceIn(tx), a),
    defineJob: (name, schema, handler, defineOptions) =>
      defineJob({ service, handlers, defaultActor, serviceIn, defined }, name, schema, handler, defineOptions),
    handle(name, schemaOrFn, fn) {
      if (typeof schemaOrFn === 'function') handlers.register(name, undefined, schemaOrFn as HandlerFn);
      else handlers.register(name, schemaOrFn, fn as HandlerFn);
    },
    recoverable(name, handler) {
      recoverables.register({
        name,
        params: handler.params,
        schedule: handler.schedule,
        retry: handler.retry,
        alertsOptOut: handler.alertsOptOut,
        run: handler.run,
      });
    },
    interval(name, handler) {
      intervals.register({ ...handler, name });
    },
    startWorker: (workerOptions) => engine.startWorker(workerOptions),
    async schedule(name, spec, a = defaultActor) {
      return (await service.declareSchedules(a, { schedules: [{ ...spec, name }] })).schedules[0]!;
    },
    schedules(specs, { retireUndeclared, actor: a = defaultActor } = {}) {
      return service.declareSchedules(a, { schedules: Object.entries(specs).map(([name, spec]) => ({ ...spec, name })), retireUndeclared });
    },
    runDue: (passOptions) => engine.runDue(passOptions),
    prune: ({ actor: a = defaultActor, ...input } = {}) => service.pruneHistory(a, input),
    database: engine.database,
    metrics: engine.metrics,
    close: () => engine.stop(),
  };
}

export type { MetricsSetting } from './composition-root.js';
export { payloadSpecOf, type DefineJobOptions, type EnqueueOptions, type JobDefinition } from './define-job.js';
export type { DefinedJob } from './service/index.js';
export { UnrecoverableError, type HandlerContext, type HandlerFn } from './service/engine/delivery/handler-registry.js';
export type { Worker } from './service/engine/worker/worker.js';
export type { RunDueResult } from './service/engine/serverless/run-due.js';
export type { FencedTransaction, FencedTransactionOptions } from './service/engine/delivery/fenced-transaction.js';
export {
  outcome,
  RunLostError,
  RunStoreUnavailableError,
  type RunStore,
  type RunOutcome,
  type RunSchedule,
  type RunRetry,
  type RunTransaction,
} from './service/engine/runs/recoverable.js';
export type { IntervalContext, IntervalHandler, IntervalResult } from './service/engine/intervals/intervals.js';
export type { PrunedBatch, PrunedRows, PruneReport } from './service/engine/maintenance/pruner.js';
export type { PruneHistoryInput, PruneHistoryResult } from './service/index.js';
export type { RetentionDefaults } from './service/retention/windows.js';

export { createJobService, createJobServiceIn, type JobService, type OuterTransaction } from './service/index.js';
export type {
  Run,
  Finding,
  TriggerRunInput,
  TriggerRunResult,
  HandlerInfo,
  HandlerOutcome,
  IntervalState,
  TriggerHandlerInput,
  TriggerHandlerResult,
  TriggeredTick,
} from './service/index.js';
export * from './service/kernel/errors.js';
export type { Actor, Role } from './service/kernel/actor.js';
export type * from './service/kernel/models.js';
export { migrate, MigrationError } from './db/migrate.js';
export { DatabaseFaultError } from './db/faults.js';
export type { Alert, AlertRule, AlertCondition, AlertSeverity, AlertDeliveryState } from './service/alerts/alerts.js';
export type { AlertEmailOptions } from './service/engine/alerts/alert-handlers.js';

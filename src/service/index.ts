/**
 * THE job service: every rule, guard and transaction of jobgate. GraphQL resolvers, the
 * library entry point and the CLI are adapters over this one object.
 */
import { createAccessService } from './access.js';
import { createBulkService } from './bulk.js';
import { createAlertsService } from './alerts.js';
import { createCatalogService } from './catalog.js';
import { outerExecutor, type OuterTransaction } from '../db/outer.js';
import { createContext, type ServiceDeps } from './context.js';
import { createEndpointService } from './endpoints.js';
import { createExecutionControlService } from './execution-control.js';
import { createHandlersService } from './handlers.js';
import { createJobLifecycleService } from './jobs.js';
import { createLiveService } from './live.js';
import { createNodeService } from './nodes.js';
import { createPermissionsService } from './permissions.js';
import { createRunsService } from './runs.js';
import { createRetentionService } from './retention.js';
import { createSchedulesService } from './schedules.js';
import { createStatsService } from './stats.js';
import * as endpointsRepo from '../db/repos/endpoints.js';
import type { Actor } from './actor.js';
import type { ServiceContext } from './context.js';
import { noopObserver } from './observer.js';

/**
 * cancelJob with its cancelled pending executions reported once committed (no worker records
 * them; metrics count them as finished CANCELLED). Inside a caller's transaction nothing has
 * committed yet: not reported. The endpoint's name is read only when someone is listening.
 */
function reportingCancels<J extends ReturnType<typeof createJobLifecycleService>>(ctx: ServiceContext, jobs: J): J {
  if (ctx.observer === noopObserver || ctx.outer) return jobs;
  return {
    ...jobs,
    async cancelJob(actor: Actor, id: string) {
      const result = await jobs.cancelJob(actor, id);
      if (result.cancelledExecutions > 0) {
        const endpoint = await endpointsRepo.findEndpointById(ctx.db, actor.workspaceId, result.job.endpointId).catch(() => undefined);
        if (endpoint) ctx.observer.pendingCancelled(endpoint.name, result.cancelledExecutions);
      }
      return result;
    },
  };
}

export function createJobService(deps: ServiceDeps) {
  const ctx = createContext(deps);
  const jobs = reportingCancels(ctx, createJobLifecycleService(ctx));
  const control = createExecutionControlService(ctx);
  const catalog = createCatalogService(ctx);
  const endpoints = createEndpointService(ctx);
  const runs = createRunsService(ctx);
  const access = createAccessService(ctx);
  return {
    ...access,
    ...catalog,
    ...endpoints,
    ...jobs,
    ...control,
    ...createBulkService(ctx),
    ...runs,
    ...createNodeService(ctx, { ...catalog, ...endpoints, ...jobs, ...runs, ...access }),
    ...createLiveService(ctx),
    ...createHandlersService(ctx),
    ...createSchedulesService(ctx),
    ...createAlertsService(ctx),
    ...createStatsService(ctx),
    ...createPermissionsService(ctx),
    ...createRetentionService(ctx, deps.retention),
  };
}

export type JobService = ReturnType<typeof createJobService>;

/**
 * The same service over the caller's own open transaction (a pg client inside BEGIN, or a
 * Kysely Transaction): every change it makes (rows, audit rows, NOTIFY wake-ups) commits or rolls
 * back with the caller's work, and no refusal aborts the caller's transaction (see
 * ServiceDeps.outerTransaction). Cheap to build: one per caller transaction.
 */
export function createJobServiceIn(deps: Omit<ServiceDeps, 'db' | 'pool' | 'outerTransaction'>, tx: OuterTransaction): JobService {
  return createJobService({ ...deps, db: outerExecutor(tx), outerTransaction: true });
}
export type { ServiceDeps } from './context.js';
export type { OuterTransaction } from '../db/outer.js';
export type { Actor, Role } from './actor.js';
export * from './errors.js';
export type * from './models.js';
export type { CreateJobResult, CancelJobResult } from './jobs.js';
export type { DeclaredSchedule, DeclaredScheduleInput, DeclareSchedulesInput, DeclareSchedulesResult } from './schedules.js';
export type { TriggerJobResult } from './execution-control.js';
export type { BulkResult, BulkSkip } from './bulk.js';
export type { ApiKey, AuditEntry, AuditPage, CreateApiKeyResult, Viewer } from './access.js';
export type { ExecutionStats } from './stats.js';
export { UnauthenticatedError } from './access.js';
export type { Run, Finding, RunStatus, Severity, TriggerRunResult, TriggerRunInput } from './runs.js';
export type {
  HandlerInfo,
  HandlerKind,
  HandlerOutcome,
  HandlerCadence,
  IntervalState,
  RunScheduleState,
  WorkerInfo,
  TriggerHandlerResult,
  TriggerHandlerInput,
  TriggeredTick,
} from './handlers.js';
export type { Connection, Edge } from './pagination.js';
export type { WorkspaceRetention, RetentionWindows, SetRetentionInput } from './retention.js';
export type { Alert, AlertRule, AlertCondition, AlertSeverity, AlertDeliveryState } from './alerts.js';

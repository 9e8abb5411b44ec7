/**
 * THE job service: every rule, guard and transaction of jobgate. GraphQL resolvers, the
 * library entry point and the CLI are adapters over this one object.
 */
import { createAccessService } from './access/access.js';
import { createBulkService } from './jobs/bulk.js';
import { createAlertsService } from './alerts/alerts.js';
import { createAlertTriageService } from './alerts/triage.js';
import { createCatalogService } from './endpoints/specs-and-configs.js';
import { outerExecutor, type OuterTransaction } from '../db/outer.js';
import { createContext, type ServiceDeps } from './kernel/context.js';
import { createEndpointService } from './endpoints/endpoints.js';
import { createJobDefinitionsService } from './endpoints/job-definitions.js';
import { createExecutionControlService } from './jobs/execution-control.js';
import { createHandlersService } from './handlers/handlers.js';
import { createJobLifecycleService } from './jobs/jobs.js';
import { createBatchService } from './workflows/batches.js';
import { createChildReads } from './workflows/children.js';
import { createLiveService } from './live/live.js';
import { createNodeService } from './nodes.js';
import { createPermissionsService } from './access/permissions.js';
import { createRunsService } from './runs/runs.js';
import { createPruneService } from './retention/prune-now.js';
import { createRetentionService } from './retention/settings.js';
import { createSchedulesService } from './jobs/declared-schedules.js';
import { createStatsService } from './jobs/stats.js';
import * as endpointsRepo from '../db/repositories/endpoints.js';
import type { Actor } from './kernel/actor.js';
import type { ServiceContext } from './kernel/context.js';
import { noopObserver } from './kernel/observer.js';

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
  const batches = createBatchService(ctx);
  return {
    ...access,
    ...catalog,
    ...endpoints,
    ...jobs,
    ...control,
    ...createBulkService(ctx),
    ...batches,
    ...createChildReads(ctx),
    ...runs,
    ...createNodeService(ctx, { ...catalog, ...endpoints, ...jobs, ...runs, ...access, ...batches }),
    ...createLiveService(ctx),
    ...createHandlersService(ctx),
    ...createSchedulesService(ctx),
    ...createJobDefinitionsService(ctx),
    ...createAlertsService(ctx),
    ...createAlertTriageService(ctx),
    ...createStatsService(ctx),
    ...createPermissionsService(ctx),
    ...createRetentionService(ctx, deps.retention),
    ...createPruneService(ctx, deps.retention),
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
export type { ServiceDeps } from './kernel/context.js';
export type { OuterTransaction } from '../db/outer.js';
export type { Actor, Role } from './kernel/actor.js';
export * from './kernel/errors.js';
export type * from './kernel/models.js';
export type { CreateJobResult, CancelJobResult } from './jobs/jobs.js';
export type { DeclaredSchedule, DeclaredScheduleInput, DeclareSchedulesInput, DeclareSchedulesResult } from './jobs/declared-schedules.js';
export type { TriggerJobResult } from './jobs/execution-control.js';
export type { DefinedJob, DefineJobInput } from './endpoints/job-definitions.js';
export type { BulkResult, BulkSkip } from './jobs/bulk.js';
export type { CancelBatchResult, CreateBatchResult } from './workflows/batches.js';
export type { ApiKey, AuditEntry, AuditPage, CreateApiKeyResult, Viewer } from './access/access.js';
export type { ExecutionStats } from './jobs/stats.js';
export { UnauthenticatedError } from './access/access.js';
export type { Run, Finding, RunStatus, Severity, TriggerRunResult, TriggerRunInput } from './runs/runs.js';
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
} from './handlers/handlers.js';
export type { Connection, Edge } from './kernel/pagination.js';
export type { WorkspaceRetention, RetentionWindows, SetRetentionInput } from './retention/settings.js';
export type { PruneHistoryInput, PruneHistoryResult } from './retention/prune-now.js';
export type { Alert, AlertRule, AlertCondition, AlertSeverity, AlertDeliveryState } from './alerts/alerts.js';

/**
 * THE job service: every rule, guard and transaction of jobgate. GraphQL resolvers, the
 * library entry point and the CLI are adapters over this one object.
 */
import { createAccessService } from './access.js';
import { createAlertsService } from './alerts.js';
import { createCatalogService } from './catalog.js';
import { createContext, type ServiceDeps } from './context.js';
import { createEndpointService } from './endpoints.js';
import { createExecutionControlService } from './execution-control.js';
import { createHandlersService } from './handlers.js';
import { createJobsService } from './jobs.js';
import { createLiveService } from './live.js';
import { createRunsService } from './runs.js';

export function createJobService(deps: ServiceDeps) {
  const ctx = createContext(deps);
  return {
    ...createAccessService(ctx),
    ...createCatalogService(ctx),
    ...createEndpointService(ctx),
    ...createJobsService(ctx),
    ...createExecutionControlService(ctx),
    ...createRunsService(ctx),
    ...createLiveService(ctx),
    ...createHandlersService(ctx),
    ...createAlertsService(ctx),
  };
}

export type JobService = ReturnType<typeof createJobService>;
export type { ServiceDeps } from './context.js';
export type { Actor, Role } from './actor.js';
export * from './errors.js';
export type * from './models.js';
export type { CreateJobResult, CancelJobResult } from './jobs.js';
export type { TriggerJobResult } from './execution-control.js';
export type { ApiKey, AuditEntry, AuditPage, CreateApiKeyResult } from './access.js';
export { UnauthenticatedError } from './access.js';
export type { Run, Finding, RunStatus, Severity, TriggerRunResult } from './runs.js';
export type { HandlerInfo, HandlerKind, HandlerOutcome, HandlerCadence, IntervalState, RunScheduleState, WorkerInfo, TriggerHandlerResult } from './handlers.js';
export type { Connection, Edge } from './pagination.js';
export type { Alert, AlertRule, AlertCondition, AlertSeverity, AlertDeliveryState } from './alerts.js';

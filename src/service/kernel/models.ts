/**
 * What the service returns: plain objects in the API's vocabulary, built from rows. Secrets
 * (signing secrets, secret config values) are dropped here, so no caller can leak them.
 */
import type { WaitingRow, WaitReason } from '../../db/statements/waiting.js';
import { createHash } from 'node:crypto';
import type {
  AttemptRow,
  AttemptTarget,
  ConfigRow,
  EndpointRow,
  BatchRow,
  ExecutionRow,
  JobDependencyRow,
  JobRow,
  PayloadSpecRow,
  WorkspaceRow,
} from '../../db/types.js';

export type { AttemptTarget } from '../../db/types.js';

export interface Workspace {
  id: string;
  slug: string;
  name: string;
  /** Most attempts in flight at once across its endpoints (INTERNAL ones apart); null: no cap. */
  concurrencyLimit: number | null;
  createdAt: Date;
}

export interface Endpoint {
  id: string;
  workspaceId: string;
  name: string;
  description: string | null;
  kind: EndpointRow['kind'];
  type: EndpointRow['type'];
  url: string | null;
  method: EndpointRow['method'];
  headers: Record<string, string>;
  timeoutMs: number | null;
  /** Whether a signing secret is set; the secret itself is write-only. */
  hasSigningSecret: boolean;
  handlerName: string | null;
  payloadSpecId: string | null;
  configId: string | null;
  maxAttempts: number | null;
  backoffBaseMs: number;
  backoffMaxMs: number;
  jitter: boolean;
  concurrencyLimit: number | null;
  /** The priority of its jobs that set none (-100 to 100, higher first). */
  defaultPriority: number;
  /** Most attempts in flight per concurrency key; null: no per-key limit. */
  keyConcurrencyLimit: number | null;
  /** At most `count` starts per `periodMs`, in bursts of up to `burst`; null: no limit. */
  rateLimit: { count: number; periodMs: number; burst: number } | null;
  /** At most `count` starts per `periodMs` for each concurrency key, in bursts of up to `burst`; null: no limit. */
  keyRateLimit: { count: number; periodMs: number; burst: number } | null;
  /** When it was paused (none of its executions is claimed until resumed); null while it runs. */
  pausedAt: Date | null;
  archivedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface PayloadSpec {
  id: string;
  workspaceId: string;
  name: string;
  description: string | null;
  jsonSchema: unknown;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface ConfigEntryView {
  key: string;
  /** null when the entry is secret: secret values are write-only. */
  value: string | null;
  secret: boolean;
}

export interface Config {
  id: string;
  workspaceId: string;
  name: string;
  entries: ConfigEntryView[];
  createdAt: Date;
  updatedAt: Date;
}

export interface CronSchedule {
  expression: string;
  timezone: string;
  startsAt: Date | null;
  endsAt: Date | null;
  misfirePolicy: NonNullable<JobRow['misfire_policy']>;
  overlapPolicy: NonNullable<JobRow['overlap_policy']>;
  nextFireAt: Date | null;
  lastFiredAt: Date | null;
  skippedTicks: number;
  lastSkipAt: Date | null;
  lastSkipReason: string | null;
  missedTicks: number;
  scheduleError: string | null;
  scheduleErrorAt: Date | null;
}

export interface Job {
  id: string;
  workspaceId: string;
  endpointId: string;
  name: string | null;
  kind: JobRow['kind'];
  status: JobRow['status'];
  input: unknown;
  maxAttempts: number;
  /** Higher first (-100 to 100); pinned on each execution when it is created. */
  priority: number;
  /** What its executions count against for their endpoint's keyConcurrencyLimit; null: none. */
  concurrencyKey: string | null;
  idempotencyKey: string | null;
  lockKey: string | null;
  /** Set on a declared schedule (declareSchedules / gate.schedule): the name the code declares it by. */
  scheduleName: string | null;
  /** A job with prerequisites: what happens when one FAILED or was CANCELLED (CANCEL retires it, RUN starts it anyway); null without. */
  onPrerequisiteFailure: 'CANCEL' | 'RUN' | null;
  /** The batch it is a member of; null: none. */
  batchId: string | null;
  /** The execution this job is a child of; null: none. */
  parentExecutionId: string | null;
  runAt: Date | null;
  cron: CronSchedule | null;
  retiredAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /**
   * Set on the object a mutation returns (see ../live/event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

/** Jobs created together (fan-out) and the job that runs once all of them ended (fan-in); see migration 000048. */
export interface Batch {
  id: string;
  workspaceId: string;
  key: string | null;
  name: string | null;
  /** Members may still be added; it completes only once closed. */
  open: boolean;
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  onCompleteJobId: string | null;
  completedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export const toBatch = (r: BatchRow): Batch => ({
  id: r.id,
  workspaceId: r.workspace_id,
  key: r.key,
  name: r.name,
  open: r.open,
  total: r.total,
  succeeded: r.succeeded,
  failed: r.failed,
  cancelled: r.cancelled,
  onCompleteJobId: r.on_complete_job_id,
  completedAt: r.completed_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** One prerequisite of a job (job_dependencies): the job it waits for, and the outcome that job had, once it has one. */
export interface JobDependency {
  jobId: string;
  prerequisiteId: string;
  /** Null while the prerequisite's scheduled execution has not ended. */
  outcome: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null;
  settledAt: Date | null;
}

export const toJobDependency = (r: JobDependencyRow): JobDependency => ({
  jobId: r.job_id,
  prerequisiteId: r.prerequisite_id,
  outcome: r.outcome as JobDependency['outcome'],
  settledAt: r.resolved_at,
});

/**
 * What a user reads a job's state as. A one-off job (IMMEDIATE, DELAYED) is done once its
 * execution is: its stored status stays ACTIVE, so that a re-drive of a failed execution runs it
 * again, and its state follows the execution instead.
 */
export type JobState = 'ACTIVE' | 'PAUSED' | 'RETIRED' | 'COMPLETED' | 'FAILED' | 'CANCELLED';

/** The state of `job`, given the status of its newest execution (undefined when it has none). */
export function jobState(job: Pick<Job, 'kind' | 'status'>, newest: ExecutionRow['status'] | undefined): JobState {
  if (job.status !== 'ACTIVE' || job.kind === 'CRON') return job.status;
  if (newest === 'SUCCEEDED') return 'COMPLETED';
  if (newest === 'FAILED') return 'FAILED';
  // cancelExecution, the job kept: nothing more runs unless someone triggers it.
  if (newest === 'CANCELLED') return 'CANCELLED';
  return 'ACTIVE';
}

export interface Execution {
  id: string;
  workspaceId: string;
  jobId: string;
  scheduledFor: Date;
  status: ExecutionRow['status'];
  attemptCount: number;
  maxAttempts: number;
  /** Its job's priority when it was created: claims take higher first. */
  priority: number;
  /** Its job's concurrency key when it was created. */
  concurrencyKey: string | null;
  /** When the next attempt may start, while the execution is PENDING. */
  nextAttemptAt: Date | null;
  /** SCHEDULE (its job's schedule or creation) or MANUAL (triggerJob). */
  trigger: ExecutionRow['trigger'];
  /** When an operator asked a running attempt to stop. */
  cancelRequestedAt: Date | null;
  /**
   * The input it is delivered with, pinned when it was created: retries use it, and editing the
   * job changes only later executions. Null for executions finished before inputs were pinned.
   */
  input: unknown;
  lastError: string | null;
  finishedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /**
   * Set on the object a mutation returns (see ../live/event-cursor.ts): the event cursor from just
   * before the mutation, to subscribe `after`. Absent on objects read by queries.
   */
  eventCursor?: string;
}

export interface Attempt {
  id: string;
  executionId: string;
  attemptNumber: number;
  workerId: string;
  startedAt: Date;
  finishedAt: Date | null;
  outcome: AttemptRow['outcome'];
  statusCode: number | null;
  durationMs: number | null;
  error: string | null;
  responseExcerpt: string | null;
  /** What an HTTP attempt called (url, method, headers as sent; secrets redacted). */
  target: AttemptTarget | null;
  /** Host and pid of the worker that made it, as it recorded them; null when not recorded. */
  workerHost: string | null;
  workerPid: number | null;
  /** A handler error's stack, redacted and capped. */
  errorStack: string | null;
  /** From this attempt's end to the next attempt's start (backoff plus the wait for a worker); null for the latest. */
  gapBeforeNextMs: number | null;
}

export const toWorkspace = (r: WorkspaceRow): Workspace => ({
  id: r.id,
  slug: r.slug,
  name: r.name,
  concurrencyLimit: r.concurrency_limit,
  createdAt: r.created_at,
});

export const toEndpoint = (r: EndpointRow): Endpoint => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  description: r.description,
  kind: r.kind,
  type: r.type,
  url: r.url,
  method: r.method,
  headers: r.headers,
  timeoutMs: r.timeout_ms,
  hasSigningSecret: r.signing_secret !== null,
  handlerName: r.handler_name,
  payloadSpecId: r.payload_spec_id,
  configId: r.config_id,
  maxAttempts: r.max_attempts,
  backoffBaseMs: r.backoff_base_ms,
  backoffMaxMs: r.backoff_max_ms,
  jitter: r.jitter,
  concurrencyLimit: r.concurrency_limit,
  defaultPriority: r.default_priority,
  keyConcurrencyLimit: r.key_concurrency_limit,
  rateLimit:
    r.rate_limit_count === null ? null : { count: r.rate_limit_count, periodMs: r.rate_limit_period_ms!, burst: r.rate_limit_burst! },
  keyRateLimit:
    r.key_rate_limit_count === null
      ? null
      : { count: r.key_rate_limit_count, periodMs: r.key_rate_limit_period_ms!, burst: r.key_rate_limit_burst! },
  pausedAt: r.paused_at,
  archivedAt: r.archived_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toPayloadSpec = (r: PayloadSpecRow): PayloadSpec => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  description: r.description,
  jsonSchema: r.json_schema,
  version: r.version,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toConfig = (r: ConfigRow): Config => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  entries: Object.entries(r.entries)
    .map(([key, e]) => ({ key, value: e.secret ? null : e.value, secret: e.secret }))
    .sort((a, b) => a.key.localeCompare(b.key)),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** A cron job's fire times: an occurrence written ahead (ahead_at) is the next until its time, then the last. */
function fireTimes(r: JobRow, now = Date.now()): { nextFireAt: Date | null; lastFiredAt: Date | null } {
  const ahead = r.ahead_at;
  if (!ahead || ahead.getTime() > now) return { nextFireAt: ahead ?? r.next_fire_at, lastFiredAt: r.last_fired_at };
  return { nextFireAt: r.next_fire_at, lastFiredAt: r.last_fired_at && r.last_fired_at > ahead ? r.last_fired_at : ahead };
}

export const toJob = (r: JobRow): Job => ({
  id: r.id,
  workspaceId: r.workspace_id,
  endpointId: r.endpoint_id,
  name: r.name,
  kind: r.kind,
  status: r.status,
  input: r.input,
  maxAttempts: r.max_attempts,
  priority: r.priority,
  concurrencyKey: r.concurrency_key,
  idempotencyKey: r.idempotency_key,
  lockKey: r.lock_key,
  scheduleName: r.schedule_name ?? null,
  onPrerequisiteFailure: r.on_prerequisite_failure ?? null,
  batchId: r.batch_id ?? null,
  parentExecutionId: r.parent_execution_id ?? null,
  runAt: r.run_at,
  cron:
    r.kind === 'CRON'
      ? {
          expression: r.cron_expression!,
          timezone: r.timezone!,
          startsAt: r.starts_at,
          endsAt: r.ends_at,
          misfirePolicy: r.misfire_policy!,
          overlapPolicy: r.overlap_policy!,
          ...fireTimes(r),
          skippedTicks: r.skipped_ticks,
          lastSkipAt: r.last_skip_at,
          lastSkipReason: r.last_skip_reason,
          missedTicks: r.missed_ticks,
          scheduleError: r.schedule_error,
          scheduleErrorAt: r.schedule_error_at,
        }
      : null,
  retiredAt: r.retired_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const toExecution = (r: ExecutionRow): Execution => ({
  id: r.id,
  workspaceId: r.workspace_id,
  jobId: r.job_id,
  scheduledFor: r.scheduled_for,
  status: r.status,
  attemptCount: r.attempt_count,
  maxAttempts: r.max_attempts,
  priority: r.priority,
  // '' on the row for none (migration 000043).
  concurrencyKey: r.concurrency_key === '' ? null : r.concurrency_key,
  nextAttemptAt: r.status === 'PENDING' ? r.run_after : null,
  trigger: r.trigger,
  cancelRequestedAt: r.cancel_requested_at,
  input: r.input ?? null,
  lastError: r.last_error,
  finishedAt: r.finished_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/**
 * An attempt's id: derived from its execution and number, so the attempt in progress (read from
 * its execution) and the row written when it ends have the same one. UUID-shaped, like every id.
 */
export function attemptId(executionId: string, attemptNumber: number): string {
  const h = createHash('sha256').update(`attempt:${executionId}:${attemptNumber}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** A worker id as a workspace's key sees it: worker ids embed host and pid, so a stable digest. */
export function opaqueWorkerId(id: string): string {
  return `worker-${createHash('sha256').update(id).digest('hex').slice(0, 12)}`;
}

export const toAttempt = (r: AttemptRow): Attempt => ({
  id: attemptId(r.execution_id, r.attempt_number),
  executionId: r.execution_id,
  attemptNumber: r.attempt_number,
  workerId: r.worker_id,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  statusCode: r.status_code,
  durationMs: r.duration_ms,
  error: r.error,
  responseExcerpt: r.response_excerpt,
  target: r.target ?? null,
  workerHost: r.worker_host,
  workerPid: r.worker_pid,
  errorStack: r.error_stack,
  gapBeforeNextMs: null,
});

/** Why a PENDING execution is waiting (src/db/statements/waiting.ts): the first gate that holds it. */
export interface WaitingFor {
  reason: WaitReason;
  /** NOT_DUE and RETRY_BACKOFF: when it becomes due; null otherwise. */
  until: Date | null;
  /** The reason in words, with its figures (the limit, the endpoint, the handler). */
  detail: string;
  /** PREREQUISITES: the jobs it still waits for (at most ten); empty for the other reasons. */
  prerequisiteIds: string[];
}

export function toWaitingFor(r: WaitingRow): WaitingFor {
  const timed =
    r.reason === 'NOT_DUE' ||
    r.reason === 'RETRY_BACKOFF' ||
    r.reason === 'ENDPOINT_RETRY_AFTER' ||
    r.reason === 'RATE_LIMITED' ||
    r.reason === 'KEY_RATE_LIMITED';
  return { reason: r.reason, until: timed ? r.until : null, detail: waitingDetail(r), prerequisiteIds: r.open_prerequisites ?? [] };
}

function waitingDetail(r: WaitingRow): string {
  switch (r.reason) {
    case 'ENDPOINT_PAUSED':
      return `endpoint "${r.endpoint_name}" is paused (since ${r.paused_at?.toISOString()})`;
    case 'JOB_PAUSED':
      return 'its job is paused';
    case 'PREREQUISITES': {
      const n = r.open_prerequisite_count ?? 0;
      return `its job waits for ${n} prerequisite job${n === 1 ? '' : 's'} to end: ${(r.open_prerequisites ?? []).join(', ')}${n > 10 ? ', …' : ''}`;
    }
    case 'RETRY_BACKOFF':
      return `attempt ${r.attempt_count} of ${r.max_attempts} failed; the next may start at ${r.until?.toISOString()}`;
    case 'NOT_DUE':
      return `due at ${r.until?.toISOString()}`;
    case 'ENDPOINT_RETRY_AFTER':
      return `endpoint "${r.endpoint_name}"'s target answered ${r.retry_after_status} with Retry-After; none of its executions starts before ${r.until?.toISOString()}`;
    case 'PREVIOUS_OCCURRENCE':
      return 'its job runs one occurrence at a time, and an earlier one is running or waiting';
    case 'ENDPOINT_CONCURRENCY_FULL':
      return `${r.running} of endpoint "${r.endpoint_name}"'s limit of ${r.concurrency_limit} attempts are in flight`;
    case 'WORKSPACE_CONCURRENCY_FULL':
      return `${r.workspace_running} of the workspace's limit of ${r.workspace_concurrency_limit} attempts are in flight`;
    case 'KEY_CONCURRENCY_FULL':
      return `${r.key_running} of key "${r.concurrency_key}"'s limit of ${r.key_concurrency_limit} attempts on endpoint "${r.endpoint_name}" are in flight`;
    case 'RATE_LIMITED':
      return `endpoint "${r.endpoint_name}" has started its ${r.rate_limit_count} per ${r.rate_limit_period_ms} ms; the next may start at ${r.until?.toISOString()}`;
    case 'KEY_RATE_LIMITED':
      return `key "${r.concurrency_key}" has started its ${r.key_rate_limit_count} per ${r.key_rate_limit_period_ms} ms on endpoint "${r.endpoint_name}"; the next may start at ${r.until?.toISOString()}`;
    case 'NO_LIVE_WORKER':
      return r.handler_name === null ? 'no worker is running' : `no running worker has registered handler "${r.handler_name}"`;
    case 'READY':
      return 'due: the next worker with room takes it, in due order';
  }
}

/* eslint-disable max-lines -- Kysely's DB: one interface per table of the schema, kept together so that test/db/types.test.ts pins them all to the database */
/**
 * Kysely table types, one per table of the migrated schema (`schema.sql`, the dump of
 * `migrations/`); test/db/types.test.ts fails when a table or a column is missing here or no
 * longer exists. Columns with a database default are `Generated<>` so inserts may omit them;
 * identity columns are `GeneratedAlways<>` so inserts cannot set them. A `text` column with a
 * CHECK listing its values is typed as that union.
 */
import type { ColumnType, Generated, GeneratedAlways, Insertable, Selectable, Updateable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type GeneratedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T = unknown> = ColumnType<T, string, string>;
type GeneratedJson<T = unknown> = ColumnType<T, string | undefined, string>;
/**
 * An `int8`: read as a number (src/db/pool.ts sets the parser: these are ids, epochs and
 * counters, far below 2^53); written as a number, a bigint or its decimal text.
 */
type Int8 = ColumnType<number, number | bigint | string, number | bigint | string>;
type GeneratedInt8 = ColumnType<number, number | bigint | string | undefined, number | bigint | string>;
/** A `uuid[]` or `text[]` column with a default (`'{}'`). */
type GeneratedArray = ColumnType<string[], string[] | undefined, string[]>;

export interface WorkspacesTable {
  id: Generated<string>;
  slug: string;
  name: string;
  created_at: GeneratedTimestamp;
  /** The highest live-event id pruned from this workspace; replays start above it (migration 000014). */
  events_pruned_through: Generated<number>;
  /** Seals the cursors of this workspace's events, findings and audit entries (migration 000016). Never leaves the gateway. */
  cursor_key: Generated<Buffer>;
}

export interface PayloadSpecsTable {
  id: Generated<string>;
  workspace_id: string;
  name: string;
  description: string | null;
  json_schema: Json<Record<string, unknown> | boolean>;
  version: Generated<number>;
  created_by_key_id: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export interface ConfigEntry {
  value: string;
  secret: boolean;
}

export interface ConfigsTable {
  id: Generated<string>;
  workspace_id: string;
  name: string;
  entries: Json<Record<string, ConfigEntry>>;
  created_by_key_id: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export type EndpointKind = 'HTTP' | 'HANDLER';
export type EndpointType = 'USER' | 'INTERNAL';
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface EndpointsTable {
  id: Generated<string>;
  workspace_id: string;
  name: string;
  description: string | null;
  kind: EndpointKind;
  type: ColumnType<EndpointType, EndpointType | undefined, EndpointType>;
  url: string | null;
  method: HttpMethod | null;
  headers: Json<Record<string, string>>;
  timeout_ms: number | null;
  signing_secret: string | null;
  handler_name: string | null;
  payload_spec_id: string | null;
  config_id: string | null;
  max_attempts: number | null;
  backoff_base_ms: Generated<number>;
  backoff_max_ms: Generated<number>;
  jitter: Generated<boolean>;
  concurrency_limit: number | null;
  created_by_key_id: string | null;
  archived_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export type JobKind = 'IMMEDIATE' | 'DELAYED' | 'CRON';
export type JobStatus = 'ACTIVE' | 'PAUSED' | 'RETIRED';
export type MisfirePolicy = 'FIRE_LATEST' | 'SKIP' | 'FIRE_ALL';
export type OverlapPolicy = 'SKIP' | 'QUEUE' | 'ALLOW';

export interface JobsTable {
  id: Generated<string>;
  workspace_id: string;
  endpoint_id: string;
  name: string | null;
  kind: JobKind;
  status: ColumnType<JobStatus, JobStatus | undefined, JobStatus>;
  input: Json<unknown>;
  max_attempts: number;
  idempotency_key: string | null;
  run_at: Timestamp | null;
  cron_expression: string | null;
  timezone: string | null;
  starts_at: Timestamp | null;
  ends_at: Timestamp | null;
  misfire_policy: MisfirePolicy | null;
  overlap_policy: OverlapPolicy | null;
  next_fire_at: Timestamp | null;
  lock_key: string | null;
  /** The name a declared schedule (declareSchedules, gate.schedule) goes by; unique among live jobs. */
  schedule_name: string | null;
  last_fired_at: Timestamp | null;
  skipped_ticks: Generated<number>;
  last_skip_at: Timestamp | null;
  last_skip_reason: string | null;
  missed_ticks: Generated<number>;
  schedule_error: string | null;
  schedule_error_at: Timestamp | null;
  /** Set on the system's own jobs (the alert evaluator): their failures raise no alert (migration 000020). */
  alerts_opt_out: Generated<boolean>;
  created_by_key_id: string | null;
  retired_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export type ExecutionTrigger = 'SCHEDULE' | 'MANUAL';
export type ExecutionStatus = 'PENDING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

export interface ExecutionsTable {
  id: Generated<string>;
  workspace_id: string;
  job_id: string;
  endpoint_id: string;
  scheduled_for: Timestamp;
  status: ColumnType<ExecutionStatus, ExecutionStatus | undefined, ExecutionStatus>;
  lock_key: string | null;
  cancel_requested_at: Timestamp | null;
  request_id: string | null;
  trigger: ColumnType<ExecutionTrigger, ExecutionTrigger | undefined, ExecutionTrigger>;
  serial: Generated<boolean>;
  created_by_key_id: string | null;
  attempt_count: Generated<number>;
  max_attempts: number;
  run_after: Timestamp;
  lease_owner: string | null;
  lease_epoch: Generated<number>;
  lease_expires_at: Timestamp | null;
  /** When the attempt in progress was claimed (the attempt's start until its row is written). */
  attempt_started_at: Timestamp | null;
  /** The input delivered, pinned at creation (migration 000018); null for executions finished before it. */
  input: ColumnType<unknown, string | undefined, string>;
  /** The token of the claim that last took it, made up by its worker (migration 000031, src/db/statements/claim.ts). */
  claim_token: string | null;
  last_error: string | null;
  finished_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export type AttemptOutcome = 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'LEASE_EXPIRED' | 'CANCELLED';

/**
 * One row per ended attempt, keyed by (execution_id, attempt_number). The attempt in progress
 * has no row yet: it is the RUNNING execution (see listAttempts).
 */
export interface AttemptsTable {
  workspace_id: string;
  execution_id: string;
  attempt_number: number;
  lease_epoch: number;
  worker_id: string;
  started_at: GeneratedTimestamp;
  finished_at: Timestamp | null;
  outcome: AttemptOutcome | null;
  status_code: number | null;
  duration_ms: number | null;
  error: string | null;
  response_excerpt: string | null;
  /** The HTTP target as called (url, method, headers; secrets redacted); null for handlers. */
  target: AttemptTarget | null;
}

/** What an HTTP attempt called, as sent; secret config values redacted. */
export interface AttemptTarget {
  url: string;
  method: string;
  headers: Record<string, string>;
}

export interface ApiKeysTable {
  id: Generated<string>;
  workspace_id: string;
  name: string;
  role: 'ADMIN' | 'OPERATOR' | 'VIEWER';
  installation_admin: Generated<boolean>;
  prefix: string;
  key_hash: Buffer;
  created_by_key_id: string | null;
  created_at: GeneratedTimestamp;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

export interface SubscriptionTicketsTable {
  id: Generated<string>;
  workspace_id: string;
  api_key_id: string;
  role: 'ADMIN' | 'OPERATOR' | 'VIEWER';
  ticket_hash: Buffer;
  created_at: GeneratedTimestamp;
  expires_at: Timestamp;
  used_at: Timestamp | null;
}

export interface AuditLogTable {
  id: GeneratedAlways<number>;
  workspace_id: string;
  actor_kind: 'user' | 'library' | 'system';
  actor_key_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  input: GeneratedJson<unknown>;
  result_code: string;
  created_at: GeneratedTimestamp;
}

export type EventTopic = 'EXECUTION' | 'JOB' | 'RUN' | 'ALERT';

/**
 * The replayable change log (migration 000009): one row per status change, written by triggers
 * on executions, jobs, runs and alert_notifications; ids increase, so a subscriber resumes
 * `after` the last one it saw.
 */
export interface EventsTable {
  id: GeneratedAlways<number>;
  workspace_id: string;
  /** ALERT: a new alert notification; subject_id is the notification. */
  topic: EventTopic;
  subject_id: string;
  job_id: string | null;
  endpoint_id: string | null;
  name: string | null;
  status: string;
  previous_status: string | null;
  attempt_count: number | null;
  created_at: GeneratedTimestamp;
  /** The kind of a pause, on a RUN event whose status is PAUSED. */
  pause_kind: PauseKind | null;
}

export type RunStatus = 'RUNNING' | 'CANCEL_REQUESTED' | 'PAUSED' | 'COMPLETED' | 'FAILED';
/** Why a run is paused: an operator's cancel, its worker's crash, or its own handler. */
export type PauseKind = 'CANCELLED' | 'CRASHED' | 'HANDLER';
export type Severity = 'INFO' | 'WARNING' | 'ERROR' | 'DATA_LOSS';

/** Recoverable runs; at most one non-terminal run per (workspace, name) (index runs_one_live_per_name). */
export interface RunsTable {
  id: Generated<string>;
  workspace_id: string;
  name: string;
  status: ColumnType<RunStatus, RunStatus | undefined, RunStatus>;
  params: GeneratedJson<unknown>;
  /** The last checkpoint, opaque bytes (JSON text when cursor_json); null before the first. */
  cursor: Buffer | null;
  cursor_json: Generated<boolean>;
  stats: GeneratedJson<Record<string, unknown>>;
  processed: GeneratedInt8;
  total: Int8 | null;
  started_at: GeneratedTimestamp;
  /** The runner executing it now; null while no runner holds it. */
  owner: string | null;
  /** Bumped by every take: a runner's writes are fenced on the epoch it took. */
  epoch: GeneratedInt8;
  heartbeat_at: Timestamp | null;
  error: string | null;
  pause_reason: string | null;
  finished_at: Timestamp | null;
  created_by_key_id: string | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
  /** How long without a heartbeat before its runner is presumed dead (the handler's own setting). */
  stale_ms: number | null;
  /** Set exactly while PAUSED (CHECK runs_pause_kind_when_paused). */
  pause_kind: PauseKind | null;
  resume_after: Timestamp | null;
  outage_hand_backs: Generated<number>;
}

/** What a run discovered; unique per (run, kind, resource), so a replayed batch records nothing twice. */
export interface FindingsTable {
  id: GeneratedAlways<number>;
  workspace_id: string;
  run_id: string;
  kind: string;
  severity: Severity;
  resource_id: string;
  detail: GeneratedJson<unknown>;
  created_at: GeneratedTimestamp;
}

/** A recoverable handler's schedule (cron in a timezone, or a fixed period), one per (workspace, name). */
export interface RunSchedulesTable {
  workspace_id: string;
  name: string;
  cron_expression: string | null;
  timezone: string | null;
  every_ms: Int8 | null;
  params: GeneratedJson<unknown>;
  next_due_at: Timestamp;
  ticks: GeneratedInt8;
  /** Ticks that found the run already live (ACTIVE or HELD) and started nothing. */
  ticks_on_active: GeneratedInt8;
  last_tick_at: Timestamp | null;
  last_tick_outcome: 'STARTED' | 'RESUMED' | 'ACTIVE' | 'HELD' | null;
  last_tick_run_id: string | null;
  last_error: string | null;
  last_error_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

export type IntervalStatus = 'OK' | 'ERROR';
export type IntervalCause = 'HANDLER' | 'TIMEOUT' | 'CRASHED';

/**
 * Interval (and on-demand) handlers, installation-wide, keyed by name: one tick at a time,
 * taken under an owner and an epoch; triggers keep error_streak, last_ok_at, last_epoch and
 * skipped_ticks.
 */
export interface IntervalHandlersTable {
  name: string;
  /** Period between ticks, in ms; null for an on-demand handler, which runs only when triggered. */
  every_ms: Int8 | null;
  next_due_at: Timestamp;
  owner: string | null;
  epoch: GeneratedInt8;
  run_started_at: Timestamp | null;
  last_status: IntervalStatus | null;
  last_count: Int8 | null;
  last_cause: IntervalCause | null;
  last_error: string | null;
  last_started_at: Timestamp | null;
  last_finished_at: Timestamp | null;
  ok_runs: GeneratedInt8;
  error_runs: GeneratedInt8;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
  overrun: Generated<boolean>;
  error_streak: Generated<number>;
  last_ok_at: Timestamp | null;
  /** Ticks skipped because a tick was still running when they came due (all time). */
  skipped_ticks: GeneratedInt8;
  /** The epoch of the tick whose outcome the last_* columns hold; null before the first outcome. */
  last_epoch: Int8 | null;
}

/** One worker process, its heartbeat and the handlers it registered (the handler catalogue reads them). */
export interface WorkersTable {
  id: string;
  host: string;
  pid: number;
  started_at: GeneratedTimestamp;
  heartbeat_at: GeneratedTimestamp;
  stale_ms: number;
  handlers: GeneratedJson<WorkerHandlerRegistration[]>;
}

/** One entry of workers.handlers. */
export interface WorkerHandlerRegistration {
  kind: string;
  name: string;
  [detail: string]: unknown;
}

export type AlertCondition = 'EXECUTION_FAILED' | 'RUN_FAILED' | 'INTERVAL_ERROR' | 'SCHEDULE_ERROR' | 'NO_SUCCESS' | 'FINDING';
export type AlertKind = 'FIRING' | 'RESOLVED';
export type AlertSubjectType = 'JOB' | 'RECOVERABLE' | 'INTERVAL';
export type AlertWebhookFormat = 'JSON' | 'SLACK';

/** Alert rules (migration 000020); soft-deleted, names unique among live rules. */
export interface AlertRulesTable {
  id: Generated<string>;
  workspace_id: string;
  name: string;
  condition: AlertCondition;
  job_ids: GeneratedArray;
  endpoint_ids: GeneratedArray;
  handler_names: GeneratedArray;
  min_consecutive: Generated<number>;
  no_success_ms: Int8 | null;
  min_severity: Severity | null;
  webhook_endpoint_id: string | null;
  webhook_format: ColumnType<AlertWebhookFormat, AlertWebhookFormat | undefined, AlertWebhookFormat>;
  email: Generated<boolean>;
  email_to: GeneratedArray;
  rate_limit_ms: GeneratedInt8;
  enabled: Generated<boolean>;
  created_by_key_id: string | null;
  deleted_at: Timestamp | null;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
}

/** Where a rule stands for one subject: firing or not, the streak, the rate limit's window. */
export interface AlertStatesTable {
  rule_id: string;
  subject_key: string;
  workspace_id: string;
  firing: Generated<boolean>;
  notified: Generated<boolean>;
  first_seen_at: Timestamp | null;
  last_seen_at: Timestamp | null;
  occurrences: Generated<number>;
  last_notified_at: Timestamp | null;
  window_start: Timestamp | null;
  suppressed: Generated<number>;
  observed: string | null;
  updated_at: GeneratedTimestamp;
}

/** An alert as raised (FIRING) or cleared (RESOLVED); at most one per (rule, subject, kind, window). */
export interface AlertNotificationsTable {
  id: Generated<string>;
  workspace_id: string;
  rule_id: string;
  condition: AlertCondition;
  kind: AlertKind;
  subject_type: AlertSubjectType;
  subject_key: string;
  subject_id: string | null;
  subject_name: string | null;
  window_start: Timestamp;
  first_seen_at: Timestamp;
  last_seen_at: Timestamp;
  occurrences: number;
  suppressed_count: Generated<number>;
  summary: string;
  detail: GeneratedJson<Record<string, unknown>>;
  webhook_job_id: string | null;
  email_job_id: string | null;
  /** clock_timestamp(): notifications written in one pass keep their order (migration 000028). */
  created_at: GeneratedTimestamp;
}

/**
 * How far the alert evaluator has read each workspace's events and findings; the pending_*
 * columns hold a pass's upper bound and the writers still open below it.
 */
export interface AlertCursorsTable {
  workspace_id: string;
  events_after: Int8;
  findings_after: Int8;
  pending_events: Int8 | null;
  pending_findings: Int8 | null;
  pending_writers: string[] | null;
  evaluated_at: Timestamp | null;
}

export type RetentionKind = 'EXECUTIONS' | 'AUDIT' | 'RUNS';

/** One pruning slice per (workspace, kind), taken under an owner, a lease and an epoch (migration 000026). */
export interface RetentionSlicesTable {
  workspace_id: string;
  kind: RetentionKind;
  next_due_at: GeneratedTimestamp;
  owner: string | null;
  epoch: GeneratedInt8;
  lease_until: Timestamp | null;
  last_started_at: Timestamp | null;
  last_finished_at: Timestamp | null;
  last_pruned: GeneratedInt8;
  pruned_total: GeneratedInt8;
}

/** A workspace's own retention windows; a null column falls back to the installation's default. */
export interface WorkspaceRetentionTable {
  workspace_id: string;
  executions_days: number | null;
  failed_executions_days: number | null;
  audit_days: number | null;
  runs_days: number | null;
  events_hours: number | null;
  updated_at: GeneratedTimestamp;
}

/** The migrations applied, with the checksum of the text each was applied from (src/db/migrate.ts). */
export interface JobgateMigrationsTable {
  version: number;
  name: string;
  checksum: string;
  applied_at: GeneratedTimestamp;
}

export interface DB {
  api_keys: ApiKeysTable;
  subscription_tickets: SubscriptionTicketsTable;
  audit_log: AuditLogTable;
  workspaces: WorkspacesTable;
  payload_specs: PayloadSpecsTable;
  configs: ConfigsTable;
  endpoints: EndpointsTable;
  jobs: JobsTable;
  executions: ExecutionsTable;
  attempts: AttemptsTable;
  events: EventsTable;
  runs: RunsTable;
  findings: FindingsTable;
  run_schedules: RunSchedulesTable;
  interval_handlers: IntervalHandlersTable;
  workers: WorkersTable;
  alert_rules: AlertRulesTable;
  alert_states: AlertStatesTable;
  alert_notifications: AlertNotificationsTable;
  alert_cursors: AlertCursorsTable;
  retention_slices: RetentionSlicesTable;
  workspace_retention: WorkspaceRetentionTable;
  jobgate_migrations: JobgateMigrationsTable;
}

export type WorkspaceRow = Selectable<WorkspacesTable>;
export type PayloadSpecRow = Selectable<PayloadSpecsTable>;
export type ConfigRow = Selectable<ConfigsTable>;
export type EndpointRow = Selectable<EndpointsTable>;
export type NewEndpoint = Insertable<EndpointsTable>;
export type EndpointPatch = Updateable<EndpointsTable>;
export type JobRow = Selectable<JobsTable>;
export type NewJob = Insertable<JobsTable>;
export type JobPatch = Updateable<JobsTable>;
export type ExecutionRow = Selectable<ExecutionsTable>;
export type AttemptRow = Selectable<AttemptsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type AuditRow = Selectable<AuditLogTable>;
export type EventRecord = Selectable<EventsTable>;
export type RunRecord = Selectable<RunsTable>;
export type FindingRecord = Selectable<FindingsTable>;
export type RunScheduleRow = Selectable<RunSchedulesTable>;
export type IntervalHandlerRow = Selectable<IntervalHandlersTable>;
export type WorkerRow = Selectable<WorkersTable>;

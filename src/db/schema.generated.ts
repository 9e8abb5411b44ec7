/**
 * The tables of the migrated schema, generated from the migrations by `npm run db:types`
 * (scripts/db-types.ts, kysely-codegen); `npm run db:types:check` fails when it is stale. Do not
 * edit: change the schema with a new migration, and give a jsonb column its shape in src/db/types.ts.
 */
import type { ColumnType, GeneratedAlways } from 'kysely';

export type Generated<T> =
  T extends ColumnType<infer S, infer I, infer U> ? ColumnType<S, I | undefined, U> : ColumnType<T, T | undefined, T>;

export type Timestamp = ColumnType<Date, Date | string, Date | string>;

export interface AlertCursors {
  evaluated_at: Timestamp | null;
  events_after: ColumnType<number, number | bigint | string, number | bigint | string>;
  findings_after: ColumnType<number, number | bigint | string, number | bigint | string>;
  pending_events: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  pending_findings: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  pending_writers: string[] | null;
  workspace_id: string;
}

export interface AlertNotifications {
  condition: string;
  created_at: Generated<Timestamp>;
  detail: Generated<ColumnType<unknown, string, string>>;
  email_job_id: string | null;
  first_seen_at: Timestamp;
  id: Generated<string>;
  kind: 'FIRING' | 'RESOLVED';
  last_seen_at: Timestamp;
  occurrences: number;
  rule_id: string;
  silence_id: string | null;
  subject_id: string | null;
  subject_key: string;
  subject_name: string | null;
  subject_type: 'JOB' | 'RECOVERABLE' | 'INTERVAL';
  summary: string;
  suppressed_count: Generated<number>;
  webhook_job_id: string | null;
  window_start: Timestamp;
  workspace_id: string;
}

export interface AlertRules {
  condition: 'EXECUTION_FAILED' | 'RUN_FAILED' | 'INTERVAL_ERROR' | 'SCHEDULE_ERROR' | 'NO_SUCCESS' | 'FINDING';
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  deleted_at: Timestamp | null;
  email: Generated<boolean>;
  email_to: Generated<string[]>;
  enabled: Generated<boolean>;
  endpoint_ids: Generated<string[]>;
  handler_names: Generated<string[]>;
  id: Generated<string>;
  job_ids: Generated<string[]>;
  min_consecutive: Generated<number>;
  min_severity: 'INFO' | 'WARNING' | 'ERROR' | 'DATA_LOSS' | null;
  name: string;
  no_success_ms: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  rate_limit_ms: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  updated_at: Generated<Timestamp>;
  webhook_endpoint_id: string | null;
  webhook_format: Generated<'JSON' | 'SLACK'>;
  workspace_id: string;
}

export interface AlertSilences {
  comment: string | null;
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  ended_at: Timestamp | null;
  ended_by_key_id: string | null;
  ends_at: Timestamp;
  id: Generated<string>;
  rule_id: string;
  starts_at: Generated<Timestamp>;
  subject_id: string | null;
  subject_key: string | null;
  subject_name: string | null;
  subject_type: 'JOB' | 'RECOVERABLE' | 'INTERVAL' | null;
  workspace_id: string;
}

export interface AlertStates {
  acknowledged_at: Timestamp | null;
  acknowledged_by_key_id: string | null;
  firing: Generated<boolean>;
  first_seen_at: Timestamp | null;
  id: Generated<string>;
  last_notified_at: Timestamp | null;
  last_seen_at: Timestamp | null;
  notified: Generated<boolean>;
  observed: string | null;
  occurrences: Generated<number>;
  rule_id: string;
  subject_key: string;
  suppressed: Generated<number>;
  updated_at: Generated<Timestamp>;
  window_start: Timestamp | null;
  workspace_id: string;
}

export interface ApiKeys {
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  id: Generated<string>;
  installation_admin: Generated<boolean>;
  key_hash: Buffer;
  last_used_at: Timestamp | null;
  name: string;
  prefix: string;
  revoked_at: Timestamp | null;
  role: 'ADMIN' | 'OPERATOR' | 'VIEWER';
  workspace_id: string;
}

export interface Attempts {
  attempt_number: number;
  duration_ms: number | null;
  error: string | null;
  /**
   * HANDLER endpoints: the stack of the error the handler threw, redacted and capped; null otherwise.
   */
  error_stack: string | null;
  execution_id: string;
  finished_at: Timestamp | null;
  lease_epoch: ColumnType<number, number | bigint | string, number | bigint | string>;
  outcome: 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'LEASE_EXPIRED' | 'CANCELLED' | null;
  response_excerpt: string | null;
  started_at: Generated<Timestamp>;
  status_code: number | null;
  target: ColumnType<unknown, string, string> | null;
  /**
   * Host name of the worker that made the attempt; null when not recorded.
   */
  worker_host: string | null;
  worker_id: string;
  /**
   * Process id of the worker that made the attempt, on worker_host; null when not recorded.
   */
  worker_pid: number | null;
  workspace_id: string;
}

export interface AuditLog {
  action: string;
  actor_key_id: string | null;
  actor_kind: 'user' | 'library' | 'system';
  created_at: Generated<Timestamp>;
  id: GeneratedAlways<number>;
  input: Generated<ColumnType<unknown, string, string>>;
  result_code: string;
  target_id: string | null;
  target_type: string | null;
  workspace_id: string;
}

export interface Batches {
  cancelled: Generated<number>;
  completed_at: Timestamp | null;
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  failed: Generated<number>;
  id: Generated<string>;
  key: string | null;
  name: string | null;
  on_complete_job_id: string | null;
  open: boolean;
  succeeded: Generated<number>;
  total: Generated<number>;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface Configs {
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  entries: Generated<ColumnType<unknown, string, string>>;
  id: Generated<string>;
  name: string;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface EndpointKeyRateBuckets {
  concurrency_key: string;
  endpoint_id: string;
  refilled_at: Timestamp;
  tokens: number;
}

export interface EndpointKeyTurns {
  endpoint_id: string;
  last_key: string;
}

export interface EndpointRateBuckets {
  endpoint_id: string;
  refilled_at: Timestamp;
  tokens: number;
}

export interface EndpointRetryAfter {
  endpoint_id: string;
  noted_at: Generated<Timestamp>;
  status_code: number;
  until: Timestamp;
}

export interface Endpoints {
  /**
   * The key that last chose where the endpoint sends (registered it, or changed its url, headers or config); null: a caller without a key. Its config's secrets are rendered into its requests only when this key wrote them, or is an ADMIN's.
   */
  aimed_by_key_id: string | null;
  archived_at: Timestamp | null;
  backoff_base_ms: Generated<number>;
  backoff_max_ms: Generated<number>;
  concurrency_limit: number | null;
  config_id: string | null;
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  /**
   * The priority of jobs created for this endpoint without one of their own (-100 to 100, higher first).
   */
  default_priority: Generated<number>;
  description: string | null;
  handler_name: string | null;
  headers: Generated<ColumnType<unknown, string, string>>;
  id: Generated<string>;
  jitter: Generated<boolean>;
  /**
   * Most attempts in flight at once per concurrency key, across all workers; null: no per-key limit. Its claims rotate between keys.
   */
  key_concurrency_limit: number | null;
  /**
   * Rate limit per concurrency key: the most starts of one key at once after a quiet spell.
   */
  key_rate_limit_burst: number | null;
  /**
   * Rate limit per concurrency key: at most this many starts per key_rate_limit_period_ms for each key (all three null: no limit).
   */
  key_rate_limit_count: number | null;
  /**
   * Rate limit per concurrency key: the period, in milliseconds.
   */
  key_rate_limit_period_ms: number | null;
  kind: 'HTTP' | 'HANDLER';
  max_attempts: number | null;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | null;
  name: string;
  /**
   * When the endpoint was paused: its executions wait and none is claimed until it is resumed (then null). Attempts running when it was paused finish.
   */
  paused_at: Timestamp | null;
  payload_spec_id: string | null;
  /**
   * Rate limit: the most starts at once after a quiet spell (the bucket's size).
   */
  rate_limit_burst: number | null;
  /**
   * Rate limit: at most this many starts per rate_limit_period_ms (all three null: no limit).
   */
  rate_limit_count: number | null;
  /**
   * Rate limit: the period, in milliseconds.
   */
  rate_limit_period_ms: number | null;
  signing_secret: string | null;
  timeout_ms: number | null;
  type: Generated<'USER' | 'INTERNAL'>;
  updated_at: Generated<Timestamp>;
  url: string | null;
  /**
   * Its workspace has a concurrency_limit and it is not INTERNAL: its attempts count against that cap. Kept by triggers.
   */
  workspace_capped: Generated<boolean>;
  workspace_id: string;
}

export interface EventGenerations {
  attached_at: Generated<Timestamp>;
  counted: Generated<ColumnType<unknown, string, string>>;
  counted_through: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  ended_at: Timestamp | null;
  gen: number;
  retired_at: Timestamp | null;
  started_at: Timestamp | null;
}

export interface Events {
  attempt_count: number | null;
  created_at: Generated<Timestamp>;
  endpoint_id: string | null;
  gen: Generated<number>;
  id: GeneratedAlways<number>;
  job_id: string | null;
  name: string | null;
  pause_kind: string | null;
  previous_status: string | null;
  status: string;
  subject_id: string;
  topic: 'EXECUTION' | 'JOB' | 'RUN' | 'ALERT';
  workspace_id: string;
}

export interface ExecutionChildren {
  cancelled: Generated<boolean>;
  parent_execution_id: string;
}

export interface Executions {
  attempt_count: Generated<number>;
  attempt_started_at: Timestamp | null;
  /**
   * A batch member's scheduled execution: how it first ended, counted into its batch once (a re-drive does not count again); null before, and for every other execution.
   */
  batch_outcome: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null;
  /**
   * PENDING and waiting for its job's prerequisites (job_dependencies): never claimed, out of the claim's indexes. Cleared when they are settled.
   */
  blocked: Generated<boolean>;
  cancel_requested_at: Timestamp | null;
  /**
   * The token of the claim that last took the execution, made up by its worker: how the worker finds what a claim took whose answer it never received. Null for executions never claimed since migration 000031.
   */
  claim_token: string | null;
  /**
   * Its job's concurrency key when it was created (pinned); '' for none.
   */
  concurrency_key: Generated<string>;
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  endpoint_id: string;
  finished_at: Timestamp | null;
  /**
   * PENDING under an endpoint with a concurrency, rate or per-key limit: claimed only under that endpoint's advisory lock. Kept by triggers.
   */
  gated: Generated<boolean>;
  /**
   * A job depends on this execution's outcome: its end settles them (executions_prerequisite_ended). False for nearly all, so the trigger costs other executions nothing.
   */
  has_dependents: Generated<boolean>;
  id: Generated<string>;
  /**
   * The input delivered, pinned when the execution was created; null only for executions that had finished before migration 000018 (their input at the time is not known).
   */
  input: ColumnType<unknown, string, string> | null;
  /**
   * PENDING and its job does not let it run (paused, and not triggered by hand; or retired): never claimed. Kept by triggers from the job's status.
   */
  job_held: Generated<boolean>;
  job_id: string;
  last_error: string | null;
  lease_epoch: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  lease_expires_at: Timestamp | null;
  lease_owner: string | null;
  lock_key: string | null;
  max_attempts: number;
  /**
   * The job's priority when this execution was created: claims take higher first.
   */
  priority: Generated<number>;
  request_id: string | null;
  run_after: Timestamp;
  scheduled_for: Timestamp;
  serial: Generated<boolean>;
  status: Generated<'PENDING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED'>;
  trigger: Generated<'SCHEDULE' | 'MANUAL'>;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface Findings {
  created_at: Generated<Timestamp>;
  detail: Generated<ColumnType<unknown, string, string>>;
  id: GeneratedAlways<number>;
  kind: string;
  resource_id: string;
  run_id: string;
  severity: 'INFO' | 'WARNING' | 'ERROR' | 'DATA_LOSS';
  workspace_id: string;
}

export interface IntervalAbandoned {
  abandoned_at: Generated<Timestamp>;
  epoch: ColumnType<number, number | bigint | string, number | bigint | string>;
  name: string;
  worker_id: string;
}

export interface IntervalHandlers {
  /**
   * Ticks abandoned after their timeout and grace, their handler still running (all time).
   */
  abandoned_total: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  created_at: Generated<Timestamp>;
  epoch: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  error_runs: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  error_streak: Generated<number>;
  /**
   * Period between ticks, in ms; null for an on-demand handler, which runs only when triggered.
   */
  every_ms: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  /**
   * A trigger with force made the next tick due: that tick runs with force (its handler skips its own grace window); cleared by the take.
   */
  force_next: Generated<boolean>;
  last_cause: 'HANDLER' | 'TIMEOUT' | 'CRASHED' | null;
  last_count: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  /**
   * The epoch (take) of the tick whose outcome last_status, last_cause, last_error ... hold; null before the first outcome.
   */
  last_epoch: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  last_error: string | null;
  /**
   * The JSON the last tick returned beside its count (OK only; null when it returned none).
   */
  last_extra: ColumnType<unknown, string, string> | null;
  last_finished_at: Timestamp | null;
  last_ok_at: Timestamp | null;
  last_started_at: Timestamp | null;
  last_status: 'OK' | 'ERROR' | null;
  name: string;
  next_due_at: Timestamp;
  ok_runs: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  /**
   * Cadence ticks due while a tick runs: SKIP (skipped; the next is the first period boundary after it ends) or QUEUE (one tick right after it).
   */
  overlap: Generated<'SKIP' | 'QUEUE'>;
  overrun: Generated<boolean>;
  owner: string | null;
  /**
   * A forced trigger queued one tick right after the running one (runs under either overlap policy); cleared by the take.
   */
  queued_after: Generated<boolean>;
  run_started_at: Timestamp | null;
  /**
   * Ticks skipped because a tick was still running when they came due (all time).
   */
  skipped_ticks: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  updated_at: Generated<Timestamp>;
}

export interface JobDependencies {
  created_at: Generated<Timestamp>;
  job_id: string;
  outcome: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null;
  position: number;
  prerequisite_id: string;
  resolved_at: Timestamp | null;
  workspace_id: string;
}

export interface JobgateMigrations {
  applied_at: Generated<Timestamp>;
  checksum: string;
  name: string;
  version: number;
}

export interface Jobs {
  /**
   * The occurrence the scheduler wrote before its time (a PENDING execution whose run_after is this); next_fire_at is then the one after it. Kept once passed, until the next write: lastFiredAt reads it.
   */
  ahead_at: Timestamp | null;
  alerts_opt_out: Generated<boolean>;
  /**
   * The batch this job is a member of; null: none.
   */
  batch_id: string | null;
  /**
   * No longer used (000051: executions.batch_outcome); dropped by a later migration.
   */
  batch_outcome: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | null;
  /**
   * The key its executions count against for their endpoint's key_concurrency_limit (e.g. a customer's id); null: none.
   */
  concurrency_key: string | null;
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  cron_expression: string | null;
  endpoint_id: string;
  ends_at: Timestamp | null;
  id: Generated<string>;
  idempotency_key: string | null;
  input: Generated<ColumnType<unknown, string, string>>;
  kind: 'IMMEDIATE' | 'DELAYED' | 'CRON';
  last_fired_at: Timestamp | null;
  last_skip_at: Timestamp | null;
  last_skip_reason: string | null;
  lock_key: string | null;
  max_attempts: number;
  misfire_policy: 'FIRE_LATEST' | 'SKIP' | 'FIRE_ALL' | null;
  missed_ticks: Generated<number>;
  name: string | null;
  next_fire_at: Timestamp | null;
  /**
   * What happens to this job when a prerequisite FAILED or was CANCELLED: CANCEL retires it, RUN starts it anyway; null: it has no prerequisites.
   */
  on_prerequisite_failure: 'CANCEL' | 'RUN' | null;
  overlap_policy: 'SKIP' | 'QUEUE' | 'ALLOW' | null;
  /**
   * The execution this job is a child of (its handler made it); null: none.
   */
  parent_execution_id: string | null;
  /**
   * Higher first (-100 to 100); pinned on each execution when it is created.
   */
  priority: Generated<number>;
  retired_at: Timestamp | null;
  run_at: Timestamp | null;
  schedule_error: string | null;
  schedule_error_at: Timestamp | null;
  schedule_name: string | null;
  skipped_ticks: Generated<number>;
  starts_at: Timestamp | null;
  status: Generated<'ACTIVE' | 'PAUSED' | 'RETIRED'>;
  timezone: string | null;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface PayloadSpecs {
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  description: string | null;
  id: Generated<string>;
  json_schema: ColumnType<unknown, string, string>;
  name: string;
  updated_at: Generated<Timestamp>;
  version: Generated<number>;
  workspace_id: string;
}

export interface RetentionSlices {
  epoch: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  kind: 'EXECUTIONS' | 'AUDIT' | 'RUNS' | 'JOBS' | 'ALERTS' | 'EVENTS';
  last_finished_at: Timestamp | null;
  last_pruned: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  last_started_at: Timestamp | null;
  lease_until: Timestamp | null;
  next_due_at: Generated<Timestamp>;
  owner: string | null;
  pruned_total: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  resume_created_at: Timestamp | null;
  resume_id: string | null;
  workspace_id: string;
}

export interface Runs {
  created_at: Generated<Timestamp>;
  created_by_key_id: string | null;
  cursor: Buffer | null;
  cursor_json: Generated<boolean>;
  epoch: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  error: string | null;
  finished_at: Timestamp | null;
  heartbeat_at: Timestamp | null;
  id: Generated<string>;
  name: string;
  outage_hand_backs: Generated<number>;
  owner: string | null;
  params: Generated<ColumnType<unknown, string, string>>;
  pause_kind: 'CANCELLED' | 'CRASHED' | 'HANDLER' | null;
  pause_reason: string | null;
  processed: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  resume_after: Timestamp | null;
  /**
   * Retries spent since the run last advanced its cursor (its handler threw); reset by a checkpoint that moves the cursor.
   */
  retry_attempts: Generated<number>;
  /**
   * The retries its handler allows (as registered in the runner that recorded its last failure); null before any.
   */
  retry_budget: number | null;
  stale_ms: number | null;
  started_at: Generated<Timestamp>;
  stats: Generated<ColumnType<unknown, string, string>>;
  status: Generated<'RUNNING' | 'CANCEL_REQUESTED' | 'PAUSED' | 'COMPLETED' | 'FAILED'>;
  total: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface RunSchedules {
  created_at: Generated<Timestamp>;
  cron_expression: string | null;
  every_ms: ColumnType<number, number | bigint | string, number | bigint | string> | null;
  last_error: string | null;
  last_error_at: Timestamp | null;
  last_tick_at: Timestamp | null;
  last_tick_outcome: 'STARTED' | 'RESUMED' | 'ACTIVE' | 'HELD' | null;
  last_tick_run_id: string | null;
  name: string;
  next_due_at: Timestamp;
  params: Generated<ColumnType<unknown, string, string>>;
  ticks: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  ticks_on_active: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  timezone: string | null;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface SubscriptionTickets {
  api_key_id: string;
  created_at: Generated<Timestamp>;
  expires_at: Timestamp;
  id: Generated<string>;
  role: 'ADMIN' | 'OPERATOR' | 'VIEWER';
  ticket_hash: Buffer;
  used_at: Timestamp | null;
  workspace_id: string;
}

export interface Workers {
  handlers: Generated<ColumnType<unknown, string, string>>;
  heartbeat_at: Generated<Timestamp>;
  host: string;
  id: string;
  pid: number;
  stale_ms: number;
  started_at: Generated<Timestamp>;
}

export interface WorkspaceRetention {
  audit_days: number | null;
  events_hours: number | null;
  executions_days: number | null;
  failed_executions_days: number | null;
  runs_days: number | null;
  updated_at: Generated<Timestamp>;
  workspace_id: string;
}

export interface Workspaces {
  /**
   * Most attempts in flight at once across the workspace's endpoints (INTERNAL ones apart), across all workers; null: no cap.
   */
  concurrency_limit: number | null;
  created_at: Generated<Timestamp>;
  cursor_key: Generated<Buffer>;
  events_pruned_through: Generated<ColumnType<number, number | bigint | string, number | bigint | string>>;
  id: Generated<string>;
  name: string;
  slug: string;
}

export interface DB {
  alert_cursors: AlertCursors;
  alert_notifications: AlertNotifications;
  alert_rules: AlertRules;
  alert_silences: AlertSilences;
  alert_states: AlertStates;
  api_keys: ApiKeys;
  attempts: Attempts;
  audit_log: AuditLog;
  batches: Batches;
  configs: Configs;
  endpoint_key_rate_buckets: EndpointKeyRateBuckets;
  endpoint_key_turns: EndpointKeyTurns;
  endpoint_rate_buckets: EndpointRateBuckets;
  endpoint_retry_after: EndpointRetryAfter;
  endpoints: Endpoints;
  event_generations: EventGenerations;
  events: Events;
  execution_children: ExecutionChildren;
  executions: Executions;
  findings: Findings;
  interval_abandoned: IntervalAbandoned;
  interval_handlers: IntervalHandlers;
  job_dependencies: JobDependencies;
  jobgate_migrations: JobgateMigrations;
  jobs: Jobs;
  payload_specs: PayloadSpecs;
  retention_slices: RetentionSlices;
  run_schedules: RunSchedules;
  runs: Runs;
  subscription_tickets: SubscriptionTickets;
  workers: Workers;
  workspace_retention: WorkspaceRetention;
  workspaces: Workspaces;
}

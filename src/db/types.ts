/**
 * Kysely table types, mirroring `migrations/`. Columns with a database default are
 * `Generated<>` so inserts may omit them.
 */
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type GeneratedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T = unknown> = ColumnType<T, string, string>;

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
  id: Generated<number>;
  workspace_id: string;
  actor_kind: 'user' | 'library' | 'system';
  actor_key_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  input: Json<unknown>;
  result_code: string;
  created_at: GeneratedTimestamp;
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

/**
 * Kysely's `DB`: the tables as generated from the migrated schema (`schema.generated.ts`, written
 * by `npm run db:types`), with the few columns whose TypeScript shape the database cannot state
 * (what a jsonb column holds, a text column filled from a checked one) retyped below, each with
 * its reason. Nullability, defaults and write types always come from the generated file; adding a
 * column is a migration and `npm run db:types`, nothing here.
 */
import type { ColumnType, Insertable, SelectType, Selectable, Updateable } from 'kysely';
import type * as Schema from './schema.generated.js';

/** `Table` with the columns named in `Columns` retyped; naming a column the table lacks does not compile. */
type Retyped<Table, Columns extends { [K in keyof Columns]: K extends keyof Table ? unknown : never }> = {
  [K in keyof Table]: K extends keyof Columns ? Columns[K] : Table[K];
};

/** The generated column `C` read as `T`: its nullability, default and write types stay as generated. */
type Reads<C, T> = C extends null ? null : C extends ColumnType<unknown, infer I, infer U> ? ColumnType<T, I, U> : T;

/** The values a column holds, as read, without SQL null. */
type ValuesOf<C> = NonNullable<SelectType<C>>;

/** One entry of configs.entries. */
export interface ConfigEntry {
  value: string;
  secret: boolean;
  /**
   * A secret entry's writer: the key that set it (null: a caller without a key). Who may point an
   * endpoint at the secret (src/service/endpoints/config-secrets.ts). Entries written before it
   * was kept have none, and count as the config creator's.
   */
  setBy?: string | null;
}

/** What an HTTP attempt called, as sent; secret config values redacted. */
export interface AttemptTarget {
  url: string;
  method: string;
  headers: Record<string, string>;
}

/** One entry of workers.handlers. */
export interface WorkerHandlerRegistration {
  kind: string;
  name: string;
  [detail: string]: unknown;
}

export type PayloadSpecsTable = Retyped<
  Schema.PayloadSpecs,
  // A JSON Schema document: an object, or true/false (the service compiles it before storing it).
  { json_schema: Reads<Schema.PayloadSpecs['json_schema'], Record<string, unknown> | boolean> }
>;
export type ConfigsTable = Retyped<
  Schema.Configs,
  // CHECK configs_entries_check holds it to an object; each value is an entry the service wrote.
  { entries: Reads<Schema.Configs['entries'], Record<string, ConfigEntry>> }
>;
export type EndpointsTable = Retyped<
  Schema.Endpoints,
  // CHECK endpoints_headers_check holds it to an object; the service accepts string values only.
  { headers: Reads<Schema.Endpoints['headers'], Record<string, string>> }
>;
export type AttemptsTable = Retyped<
  Schema.Attempts,
  // Written when an HTTP attempt ends, from the request as sent.
  { target: Reads<Schema.Attempts['target'], AttemptTarget> }
>;
export type EventsTable = Retyped<
  Schema.Events,
  // Copied by the runs trigger from runs.pause_kind (checked there, not here: migration 000022).
  { pause_kind: Reads<Schema.Events['pause_kind'], PauseKind> }
>;
export type RunsTable = Retyped<
  Schema.Runs,
  // A handler's counters, written at each checkpoint: always an object.
  { stats: Reads<Schema.Runs['stats'], Record<string, unknown>> }
>;
export type WorkersTable = Retyped<
  Schema.Workers,
  // The handlers a worker registered, written at its start; the handler catalogue reads them.
  { handlers: Reads<Schema.Workers['handlers'], WorkerHandlerRegistration[]> }
>;
export type AlertNotificationsTable = Retyped<
  Schema.AlertNotifications,
  {
    // Copied from the rule's condition (checked on alert_rules, not repeated here).
    condition: Reads<Schema.AlertNotifications['condition'], AlertCondition>;
    // Built by the alert evaluator: always an object.
    detail: Reads<Schema.AlertNotifications['detail'], Record<string, unknown>>;
  }
>;
export type ApiKeysTable = Schema.ApiKeys;
export type AuditLogTable = Schema.AuditLog;

export type DB = Retyped<
  Schema.DB,
  {
    payload_specs: PayloadSpecsTable;
    configs: ConfigsTable;
    endpoints: EndpointsTable;
    attempts: AttemptsTable;
    events: EventsTable;
    runs: RunsTable;
    workers: WorkersTable;
    alert_notifications: AlertNotificationsTable;
  }
>;

// The unions a CHECK lists, by the names the code uses.
export type EndpointKind = ValuesOf<Schema.Endpoints['kind']>;
export type EndpointType = ValuesOf<Schema.Endpoints['type']>;
export type HttpMethod = ValuesOf<Schema.Endpoints['method']>;
export type JobKind = ValuesOf<Schema.Jobs['kind']>;
export type JobStatus = ValuesOf<Schema.Jobs['status']>;
export type MisfirePolicy = ValuesOf<Schema.Jobs['misfire_policy']>;
export type OverlapPolicy = ValuesOf<Schema.Jobs['overlap_policy']>;
export type ExecutionTrigger = ValuesOf<Schema.Executions['trigger']>;
export type ExecutionStatus = ValuesOf<Schema.Executions['status']>;
export type AttemptOutcome = ValuesOf<Schema.Attempts['outcome']>;
export type EventTopic = ValuesOf<Schema.Events['topic']>;
export type RunStatus = ValuesOf<Schema.Runs['status']>;
/** Why a run is paused: an operator's cancel, its worker's crash, or its own handler. */
export type PauseKind = ValuesOf<Schema.Runs['pause_kind']>;
export type Severity = ValuesOf<Schema.Findings['severity']>;
export type IntervalStatus = ValuesOf<Schema.IntervalHandlers['last_status']>;
export type IntervalCause = ValuesOf<Schema.IntervalHandlers['last_cause']>;
export type AlertCondition = ValuesOf<Schema.AlertRules['condition']>;
export type AlertKind = ValuesOf<Schema.AlertNotifications['kind']>;
export type AlertSubjectType = ValuesOf<Schema.AlertNotifications['subject_type']>;
export type AlertWebhookFormat = ValuesOf<Schema.AlertRules['webhook_format']>;
export type RetentionKind = ValuesOf<Schema.RetentionSlices['kind']>;

export type WorkspaceRow = Selectable<DB['workspaces']>;
export type PayloadSpecRow = Selectable<DB['payload_specs']>;
export type ConfigRow = Selectable<DB['configs']>;
export type EndpointRow = Selectable<DB['endpoints']>;
export type NewEndpoint = Insertable<DB['endpoints']>;
export type EndpointPatch = Updateable<DB['endpoints']>;
export type JobRow = Selectable<DB['jobs']>;
export type NewJob = Insertable<DB['jobs']>;
export type JobPatch = Updateable<DB['jobs']>;
export type ExecutionRow = Selectable<DB['executions']>;
export type JobDependencyRow = Selectable<DB['job_dependencies']>;
export type BatchRow = Selectable<DB['batches']>;
export type AttemptRow = Selectable<DB['attempts']>;
export type ApiKeyRow = Selectable<DB['api_keys']>;
export type AuditRow = Selectable<DB['audit_log']>;
export type EventRecord = Selectable<DB['events']>;
export type RunRecord = Selectable<DB['runs']>;
export type FindingRecord = Selectable<DB['findings']>;
export type RunScheduleRow = Selectable<DB['run_schedules']>;
export type IntervalHandlerRow = Selectable<DB['interval_handlers']>;
export type WorkerRow = Selectable<DB['workers']>;
export type WorkspaceRetentionRecord = Selectable<DB['workspace_retention']>;
export type AlertStateRecord = Selectable<DB['alert_states']>;
export type AlertRuleRecord = Selectable<DB['alert_rules']>;
export type AlertNotificationRecord = Selectable<DB['alert_notifications']>;
export type AlertSilenceRecord = Selectable<DB['alert_silences']>;

-- Foundation: workspaces, payload specs, configs, endpoints, jobs, executions, attempts.
--
-- Every table carries a non-null workspace_id, and every reference between tenant rows is a
-- composite foreign key on (workspace_id, id): a row can only ever point at a row of its own
-- workspace, whatever the application does.

create table workspaces (
  id          uuid primary key default gen_random_uuid(),
  slug        text not null unique check (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name        text not null check (length(name) between 1 and 200),
  created_at  timestamptz not null default now()
);

-- The workspace a fresh installation starts with.
insert into workspaces (slug, name) values ('default', 'Default workspace');

create table payload_specs (
  id            uuid primary key default gen_random_uuid(),
  workspace_id  uuid not null references workspaces (id),
  name          text not null,
  description   text,
  json_schema   jsonb not null,
  version       integer not null default 1,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  unique (workspace_id, name),
  unique (workspace_id, id)
);

create table configs (
  id            uuid primary key default gen_random_uuid(),
  workspace_id  uuid not null references workspaces (id),
  name          text not null,
  -- {"key": {"value": "...", "secret": false}, ...}
  entries       jsonb not null default '{}'::jsonb check (jsonb_typeof(entries) = 'object'),
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  unique (workspace_id, name),
  unique (workspace_id, id)
);

create table endpoints (
  id                 uuid primary key default gen_random_uuid(),
  workspace_id       uuid not null references workspaces (id),
  name               text not null check (name ~ '^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*$'),
  description        text,
  kind               text not null check (kind in ('HTTP', 'HANDLER')),
  type               text not null default 'USER' check (type in ('USER', 'INTERNAL')),
  url                text,
  method             text check (method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')),
  headers            jsonb not null default '{}'::jsonb check (jsonb_typeof(headers) = 'object'),
  timeout_ms         integer check (timeout_ms > 0),
  signing_secret     text,
  handler_name       text,
  payload_spec_id    uuid,
  config_id          uuid,
  max_attempts       integer check (max_attempts between 1 and 100),
  backoff_base_ms    integer not null default 1000 check (backoff_base_ms > 0),
  backoff_max_ms     integer not null default 300000 check (backoff_max_ms >= backoff_base_ms),
  jitter             boolean not null default true,
  concurrency_limit  integer check (concurrency_limit > 0),
  archived_at        timestamptz,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, payload_spec_id) references payload_specs (workspace_id, id),
  foreign key (workspace_id, config_id) references configs (workspace_id, id),
  -- An HTTP endpoint has a target and no handler; a HANDLER endpoint the reverse.
  check (
    (kind = 'HTTP' and url is not null and method is not null and handler_name is null)
    or (kind = 'HANDLER' and handler_name is not null and url is null)
  )
);

-- One live endpoint per name and workspace; an archived name may be registered again.
create unique index endpoints_live_name on endpoints (workspace_id, name) where archived_at is null;

create table jobs (
  id                uuid primary key default gen_random_uuid(),
  workspace_id      uuid not null references workspaces (id),
  endpoint_id       uuid not null,
  name              text,
  kind              text not null check (kind in ('IMMEDIATE', 'DELAYED', 'CRON')),
  status            text not null default 'ACTIVE' check (status in ('ACTIVE', 'PAUSED', 'RETIRED')),
  input             jsonb not null default '{}'::jsonb,
  max_attempts      integer not null check (max_attempts between 1 and 100),
  -- Absent is NULL, never '': NULLs are distinct in the unique index below, so keyless jobs
  -- never collide with each other.
  idempotency_key   text check (idempotency_key <> ''),
  run_at            timestamptz,
  cron_expression   text,
  timezone          text,
  starts_at         timestamptz,
  ends_at           timestamptz,
  misfire_policy    text check (misfire_policy in ('FIRE_LATEST', 'SKIP', 'FIRE_ALL')),
  overlap_policy    text check (overlap_policy in ('SKIP', 'QUEUE', 'ALLOW')),
  next_fire_at      timestamptz,
  retired_at        timestamptz,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, endpoint_id) references endpoints (workspace_id, id),
  check ((kind = 'DELAYED') = (run_at is not null)),
  check ((kind = 'CRON') = (cron_expression is not null and timezone is not null
                            and misfire_policy is not null and overlap_policy is not null)),
  check (kind = 'CRON' or next_fire_at is null),
  check (starts_at is null or ends_at is null or starts_at < ends_at),
  check ((status = 'RETIRED') = (retired_at is not null))
);

create unique index jobs_idempotency_key on jobs (workspace_id, endpoint_id, idempotency_key);
create index jobs_workspace_created on jobs (workspace_id, created_at desc, id desc);
create index jobs_next_fire on jobs (next_fire_at) where status = 'ACTIVE' and next_fire_at is not null;

create table executions (
  id                uuid primary key default gen_random_uuid(),
  workspace_id      uuid not null references workspaces (id),
  job_id            uuid not null,
  scheduled_for     timestamptz not null,
  status            text not null default 'PENDING'
                    check (status in ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  attempt_count     integer not null default 0 check (attempt_count >= 0),
  max_attempts      integer not null check (max_attempts between 1 and 100),
  -- When the next attempt may start: scheduled_for at first, pushed back by backoff.
  run_after         timestamptz not null,
  lease_owner       text,
  lease_epoch       bigint not null default 0,
  lease_expires_at  timestamptz,
  last_error        text,
  finished_at       timestamptz,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, job_id) references jobs (workspace_id, id),
  -- One execution per occurrence, whatever the number of schedulers.
  unique (job_id, scheduled_for)
);

create index executions_job_created on executions (job_id, created_at desc, id desc);
create index executions_workspace_created on executions (workspace_id, created_at desc, id desc);
create index executions_due on executions (run_after) where status = 'PENDING';

create table attempts (
  id                uuid primary key default gen_random_uuid(),
  workspace_id      uuid not null references workspaces (id),
  execution_id      uuid not null,
  attempt_number    integer not null check (attempt_number >= 1),
  lease_epoch       bigint not null,
  worker_id         text not null,
  started_at        timestamptz not null default now(),
  finished_at       timestamptz,
  outcome           text check (outcome in ('SUCCEEDED', 'FAILED', 'TIMED_OUT', 'LEASE_EXPIRED', 'CANCELLED')),
  status_code       integer,
  duration_ms       integer,
  error             text,
  response_excerpt  text,
  foreign key (workspace_id, execution_id) references executions (workspace_id, id),
  unique (execution_id, attempt_number)
);

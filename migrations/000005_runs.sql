-- Recoverable runs: long scans that checkpoint a cursor, pause, resume, survive crashes and
-- report findings.

create table runs (
  id            uuid primary key default gen_random_uuid(),
  workspace_id  uuid not null references workspaces (id),
  name          text not null check (name ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  status        text not null default 'RUNNING'
                check (status in ('RUNNING', 'CANCEL_REQUESTED', 'PAUSED', 'COMPLETED', 'FAILED')),
  params        jsonb not null default '{}'::jsonb,
  -- The handler's opaque cursor: raw bytes, or JSON text when cursor_json.
  cursor        bytea,
  cursor_json   boolean not null default false,
  stats         jsonb not null default '{}'::jsonb,
  processed     bigint not null default 0 check (processed >= 0),
  total         bigint check (total >= 0),
  -- Fixed at run start; handlers use it as their "now".
  started_at    timestamptz not null default now(),
  -- The worker running it, and a fencing epoch bumped at each take-over.
  owner         text,
  epoch         bigint not null default 0,
  heartbeat_at  timestamptz,
  error         text,
  pause_reason  text,
  finished_at   timestamptz,
  created_by_key_id uuid references api_keys (id),
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  unique (workspace_id, id)
);

-- At most one run that is not finished per name and workspace: concurrent triggers converge.
create unique index runs_one_live_per_name on runs (workspace_id, name)
  where status in ('RUNNING', 'CANCEL_REQUESTED', 'PAUSED');
create index runs_workspace_created on runs (workspace_id, created_at desc, id desc);
-- Runners look for runs to take: running, unowned.
create index runs_unowned on runs (name) where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is null;

create table findings (
  id            bigint generated always as identity primary key,
  workspace_id  uuid not null references workspaces (id),
  run_id        uuid not null,
  kind          text not null check (length(kind) between 1 and 200),
  severity      text not null check (severity in ('INFO', 'WARNING', 'ERROR', 'DATA_LOSS')),
  resource_id   text not null check (length(resource_id) between 1 and 500),
  detail        jsonb not null default '{}'::jsonb,
  created_at    timestamptz not null default now(),
  foreign key (workspace_id, run_id) references runs (workspace_id, id),
  -- Replaying a batch after a crash records nothing twice.
  unique (run_id, kind, resource_id)
);
create index findings_run on findings (run_id, id);

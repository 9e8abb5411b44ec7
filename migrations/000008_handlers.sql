-- The handler catalogue: worker processes and what each registered, interval handlers (plain
-- periodic work), and the schedules of recoverable handlers.
--
-- `workers` and `interval_handlers` are installation-level, not per workspace: handlers are code
-- in a process, not tenant data. Schedules of recoverable handlers trigger runs, which belong to
-- a workspace, so `run_schedules` rows carry theirs.

create table workers (
  id            text primary key check (length(id) between 1 and 300),
  host          text not null,
  pid           integer not null,
  started_at    timestamptz not null default now(),
  heartbeat_at  timestamptz not null default now(),
  -- Without a heartbeat for this long the worker is gone (a few of its own heartbeat periods).
  stale_ms      integer not null check (stale_ms > 0),
  -- What the process registered: [{kind, name, everyMs?, cron?, timezone?, timeoutMs?, workspace?}].
  handlers      jsonb not null default '[]'::jsonb
);
create index workers_heartbeat on workers (heartbeat_at);

create table interval_handlers (
  name            text primary key check (name ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  every_ms        bigint not null check (every_ms > 0),
  -- The next tick; taking a tick moves it (the compare-and-set that makes one execution per tick).
  next_due_at     timestamptz not null,
  -- The worker running it now and a fencing epoch bumped at each take; both null/idle otherwise.
  owner           text,
  epoch           bigint not null default 0,
  run_started_at  timestamptz,
  last_status     text check (last_status in ('OK', 'ERROR')),
  last_count      bigint,
  last_cause      text check (last_cause in ('HANDLER', 'TIMEOUT', 'CRASHED')),
  last_error      text,
  last_started_at timestamptz,
  last_finished_at timestamptz,
  ok_runs         bigint not null default 0,
  error_runs      bigint not null default 0,
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now(),
  check ((owner is null) = (run_started_at is null)),
  check ((last_status = 'ERROR') = (last_cause is not null))
);
-- Workers look for due, idle ticks of the handlers they have.
create index interval_handlers_due on interval_handlers (next_due_at) where owner is null;

create table run_schedules (
  workspace_id      uuid not null references workspaces (id),
  name              text not null check (name ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  cron_expression   text,
  timezone          text,
  every_ms          bigint check (every_ms > 0),
  params            jsonb not null default '{}'::jsonb,
  next_due_at       timestamptz not null,
  ticks             bigint not null default 0,
  -- Ticks that found a run already active (and so started nothing).
  ticks_on_active   bigint not null default 0,
  last_tick_at      timestamptz,
  last_tick_outcome text check (last_tick_outcome in ('STARTED', 'RESUMED', 'ACTIVE')),
  last_tick_run_id  uuid,
  last_error        text,
  last_error_at     timestamptz,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  primary key (workspace_id, name),
  -- Either a cron expression (with its time zone) or an interval.
  check ((cron_expression is not null and timezone is not null and every_ms is null)
      or (cron_expression is null and timezone is null and every_ms is not null))
);
create index run_schedules_due on run_schedules (next_due_at);

-- Retention: finished history is kept for a window, then pruned (src/service/engine/retention.ts).
--
-- `workspace_retention` holds what a workspace's ADMIN set (setRetention); a null column means
-- "the installation's default" (JOBGATE_RETENTION_*), so changing a default reaches every
-- workspace that did not choose its own. 0 days keeps that history forever.
create table workspace_retention (
  workspace_id           uuid primary key references workspaces (id),
  executions_days        integer check (executions_days between 0 and 36500),
  failed_executions_days integer check (failed_executions_days between 0 and 36500),
  audit_days             integer check (audit_days between 0 and 36500),
  runs_days              integer check (runs_days between 0 and 36500),
  events_hours           integer check (events_hours between 1 and 876000),
  updated_at             timestamptz not null default now()
);

-- One row per workspace and kind of history: the unit of pruning work. Every worker prunes; a
-- slice is taken by one at a time with a compare-and-set on (owner, lease_until) after a
-- FOR UPDATE SKIP LOCKED read, and each batch of deletions commits only while its taker still
-- holds it (same epoch, lease not run out), so two workers never prune the same slice at once
-- and a stalled worker's late batch is fenced out. Live events are pruned by each workspace's
-- reaper (migration 000014 keeps their replay horizon), with the window set here.
create table retention_slices (
  workspace_id     uuid not null references workspaces (id),
  kind             text not null check (kind in ('EXECUTIONS', 'AUDIT', 'RUNS')),
  next_due_at      timestamptz not null default now(),
  owner            text,
  epoch            bigint not null default 0,
  lease_until      timestamptz,
  last_started_at  timestamptz,
  last_finished_at timestamptz,
  -- Rows deleted by the last completed pass, and by all passes (attempts and findings included).
  last_pruned      bigint not null default 0,
  pruned_total     bigint not null default 0,
  primary key (workspace_id, kind),
  check ((owner is null) = (lease_until is null))
);
create index retention_slices_due on retention_slices (next_due_at);

create function jobgate_provision_retention() returns trigger language plpgsql as $$
begin
  insert into retention_slices (workspace_id, kind)
  select new.id, k from unnest(array['EXECUTIONS', 'AUDIT', 'RUNS']) as k
  on conflict do nothing;
  return new;
end $$;

create trigger workspaces_provision_retention after insert on workspaces
  for each row execute function jobgate_provision_retention();

-- Workspaces that exist already.
insert into retention_slices (workspace_id, kind)
select w.id, k from workspaces w cross join unnest(array['EXECUTIONS', 'AUDIT', 'RUNS']) as k
on conflict do nothing;

-- Cron: schedule bookkeeping on jobs, serial (QUEUE) executions, and the per-workspace reaper.

alter table jobs
  add column last_fired_at timestamptz,
  -- Occurrences skipped because the previous execution was still live (overlap policy SKIP) or
  -- its lock key was held.
  add column skipped_ticks integer not null default 0,
  add column last_skip_at timestamptz,
  add column last_skip_reason text,
  -- Occurrences missed while no scheduler ran, not fired per the misfire policy.
  add column missed_ticks integer not null default 0,
  -- The last error computing this schedule; the schedule continues from the next computable occurrence.
  add column schedule_error text,
  add column schedule_error_at timestamptz;

-- Executions of QUEUE jobs run one at a time, in order (see the claim query).
alter table executions add column serial boolean not null default false;

-- Every workspace has a reaper: a system job on an INTERNAL endpoint that retires cron jobs past
-- their endsAt. Provisioned by trigger, so no path that creates a workspace can forget it.
create function jobgate_provision_reaper(ws uuid) returns void language plpgsql as $$
declare
  reaper_id uuid;
begin
  insert into endpoints (workspace_id, name, description, kind, type, handler_name, max_attempts)
  values (ws, 'jobgate.reaper', 'Retires cron jobs past their endsAt (system-owned).', 'HANDLER', 'INTERNAL', 'jobgate.reaper', 3)
  returning id into reaper_id;
  insert into jobs (workspace_id, endpoint_id, name, kind, input, max_attempts, cron_expression, timezone,
                    misfire_policy, overlap_policy, next_fire_at)
  values (ws, reaper_id, 'reaper', 'CRON', '{}', 3, '*/5 * * * *', 'UTC', 'FIRE_LATEST', 'SKIP', now());
end $$;

create function jobgate_provision_workspace() returns trigger language plpgsql as $$
begin
  perform jobgate_provision_reaper(new.id);
  return new;
end $$;

create trigger workspaces_provision after insert on workspaces
  for each row execute function jobgate_provision_workspace();

-- Workspaces that exist already.
select jobgate_provision_reaper(id) from workspaces;

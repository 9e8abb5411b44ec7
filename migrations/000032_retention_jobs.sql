-- Retention of whole jobs and of platform rows (src/service/engine/maintenance/pruner.ts).
--
-- Two more kinds of slice per workspace beside EXECUTIONS, AUDIT and RUNS (000026):
--  - JOBS: finished one-off jobs (IMMEDIATE, DELAYED) and retired jobs, deleted with their
--    executions and attempts once every execution is past its window. Until now a job row was
--    never deleted, and a one-off job's one execution was always among its job's newest, so a
--    queue workload (one job per unit of work) grew without bound.
--  - ALERTS: alert notifications past their window.
-- Taken, fenced and batched exactly as the other slices.
alter table retention_slices drop constraint retention_slices_kind_check;
alter table retention_slices add constraint retention_slices_kind_check
  check (kind in ('EXECUTIONS', 'AUDIT', 'RUNS', 'JOBS', 'ALERTS'));

create or replace function jobgate_provision_retention() returns trigger language plpgsql as $$
begin
  insert into retention_slices (workspace_id, kind)
  select new.id, k from unnest(array['EXECUTIONS', 'AUDIT', 'RUNS', 'JOBS', 'ALERTS']) as k
  on conflict do nothing;
  return new;
end $$;

-- Where an unfinished pass over a slice got to (its creation-time walk, see pruning.ts), kept when
-- the slice is handed back unfinished: a bounded prune (a serverless pass runs a few batches)
-- then goes on from there next time instead of reading the same first rows again, so a slice
-- that needs more batches than one call allows still gets through. Cleared when a pass finishes.
alter table retention_slices add column resume_created_at timestamptz, add column resume_id uuid;

-- Workspaces that exist already.
insert into retention_slices (workspace_id, kind)
select w.id, k from workspaces w cross join unnest(array['JOBS', 'ALERTS']) as k
on conflict do nothing;

-- The JOBS walk: a workspace's jobs that can ever go (one-off, or retired), oldest first. A
-- recurring job that is not retired is never read.
create index jobs_workspace_prunable on jobs (workspace_id, created_at, id)
  where kind <> 'CRON' or status = 'RETIRED';

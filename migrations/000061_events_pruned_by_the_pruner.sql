-- Live events are pruned by the pruner, as a slice of their own per workspace (EVENTS), instead of
-- by each workspace's reaper job.
--
-- The reaper deleted them in statements of 10,000 in a tight loop, every five minutes. Beside a
-- drain that took a third of the drain while it ran (`npm run bench -- retention`: 4,989 -> 3,373
-- executions/s, 126,000 events pruned a second), and at 5,000 executions a second the five
-- minutes' events took longer than the reaper's own timeout, so its run was cut and retried. The
-- pruner is a loop with a lease and a pace (src/service/engine/maintenance/pruner.ts): a fifth of a
-- connection, a twenty-fifth while its workers are behind. Each batch still moves the workspace's
-- replay horizon (migration 000014) in its own statement, and is audited as before
-- ({"kind":"EVENTS","events":n}). A serverless pass and an on-demand prune take the slice as they
-- take the others.
alter table retention_slices drop constraint retention_slices_kind_check;
alter table retention_slices add constraint retention_slices_kind_check
  check (kind in ('EXECUTIONS', 'AUDIT', 'RUNS', 'JOBS', 'ALERTS', 'EVENTS'));

create or replace function jobgate_provision_retention() returns trigger language plpgsql as $$
begin
  insert into retention_slices (workspace_id, kind)
  select new.id, k from unnest(array['EXECUTIONS', 'AUDIT', 'RUNS', 'JOBS', 'ALERTS', 'EVENTS']) as k
  on conflict do nothing;
  return new;
end $$;

-- Workspaces that exist already.
insert into retention_slices (workspace_id, kind)
select w.id, 'EVENTS' from workspaces w
on conflict do nothing;

-- A run whose handler throws is retried from its last checkpoint (src/service/engine/runs/run-store.ts)
-- instead of ending FAILED at once: handed back unowned and RUNNING, not taken again before
-- resume_after (the backoff, as for an outage hand-back, migration 000015).
--  - retry_attempts: retries spent since the run last made progress (a checkpoint that moved its
--    cursor resets it); once its handler's budget is spent, the next throw ends the run FAILED.
--  - retry_budget: that budget, as the runner that recorded the last failure had it registered.
-- `error` holds why the last attempt failed while the run waits to retry.
alter table runs add column retry_attempts integer not null default 0 check (retry_attempts >= 0);
comment on column runs.retry_attempts is
  'Retries spent since the run last advanced its cursor (its handler threw); reset by a checkpoint that moves the cursor.';
alter table runs add column retry_budget integer check (retry_budget >= 0);
comment on column runs.retry_budget is
  'The retries its handler allows (as registered in the runner that recorded its last failure); null before any.';

-- runProgress subscribers also see a run start waiting to retry and its next attempt being taken.
create or replace function jobgate_events_runs_update() returns trigger language plpgsql as $$
declare
  moved record;
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, name, status, previous_status, pause_kind)
  select n.workspace_id, 'RUN', n.id, n.name, n.status, o.status, case when n.status = 'PAUSED' then n.pause_kind end
  from new_rows n join old_rows o on o.id = n.id
  where n.status is distinct from o.status
  order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  for moved in
    select n.id from new_rows n join old_rows o on o.id = n.id
    where n.status is distinct from o.status or n.processed is distinct from o.processed
       or n.total is distinct from o.total or n.stats is distinct from o.stats
       or n.cursor is distinct from o.cursor
       or n.retry_attempts is distinct from o.retry_attempts or n.resume_after is distinct from o.resume_after
  loop
    perform pg_notify('jobgate_events', 'r:' || moved.id);
  end loop;
  return null;
end $$;

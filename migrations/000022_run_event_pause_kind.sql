-- A run's pause kind in the event that records the pause.
--
-- The alert evaluator (src/service/engine/alert-evaluator.ts) runs once a minute; a run paused as
-- CRASHED by the sweep and resumed before that pass (by an operator, or by its schedule) is
-- RUNNING again with no pause kind by then. Read from the run as it is now, the crash is lost.
-- Written here, in the transaction that pauses the run, the event itself says it was a crash,
-- whatever the run has become since. Null for every status but PAUSED.

alter table events add column pause_kind text;

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
  loop
    perform pg_notify('jobgate_events', 'r:' || moved.id);
  end loop;
  return null;
end $$;

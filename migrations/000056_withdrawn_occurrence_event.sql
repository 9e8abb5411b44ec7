-- A cron occurrence withdrawn before its time (migration 000054) ends in the event stream.
--
-- Its execution is deleted, but its creation (a PENDING event) had been written and may have been
-- delivered: a subscriber to the job's executions was left with an execution pending for good, and
-- a replay from before it showed one too. Now the withdrawal writes the execution's last event,
-- CANCELLED from PENDING with no attempt made, in the transaction that withdraws it: it was never
-- due and never ran, and will not. The occurrence written again is another execution, with a
-- creation event of its own.
create or replace function jobgate_withdraw_ahead() returns trigger language plpgsql as $$
begin
  -- The writer mark before the event takes an id (src/subscriptions/hub/watermark.ts).
  perform jobgate_event_writer();
  with withdrawn as (
    delete from executions e
    where e.workspace_id = old.workspace_id and e.endpoint_id = old.endpoint_id and e.job_id = old.id
      and e.scheduled_for = old.ahead_at and e.trigger = 'SCHEDULE' and e.status = 'PENDING' and e.attempt_count = 0
    returning e.id, e.workspace_id, e.job_id, e.endpoint_id, e.attempt_count
  )
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status, attempt_count)
  select w.workspace_id, 'EXECUTION', w.id, w.job_id, w.endpoint_id, 'CANCELLED', 'PENDING', w.attempt_count
  from withdrawn w;
  if not found then return new; end if;
  perform pg_notify('jobgate_events', 'e');
  if new.status = 'ACTIVE'
     and (new.cron_expression, new.timezone, new.starts_at) is not distinct from (old.cron_expression, old.timezone, old.starts_at) then
    new.next_fire_at := case when new.ends_at is null or old.ahead_at < new.ends_at then old.ahead_at end;
  end if;
  new.ahead_at := null;
  return new;
end $$;

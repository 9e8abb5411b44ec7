-- Cron occurrences written ahead of their time, so that they start on time however many fall due
-- at once. The scheduler writes a job's next occurrence up to its lead (JOBGATE_CRON_LEAD_MS)
-- before it is due: a PENDING execution with run_after at its time, which workers claim when it
-- comes. Writing 100,000 occurrences takes the database about 11 s; written at their time, the
-- last ones started that late.
--
-- jobs.ahead_at is the occurrence written ahead, next_fire_at the one after it. A lead under a
-- minute (the schedule's finest step) leaves at most one occurrence of a job ahead.
alter table jobs add column ahead_at timestamptz;

comment on column jobs.ahead_at is
  'The occurrence the scheduler wrote before its time (a PENDING execution whose run_after is this); next_fire_at is then the one after it. Kept once passed, until the next write: lastFiredAt reads it.';

-- An occurrence still ahead of its time is withdrawn when its job changes, so that it happens as if
-- it had been written at its time: a pause or a retirement never fires it, an edit of the input or
-- the limits reaches it, a new schedule replaces it. Withdrawn means deleted: it was never due and
-- has no attempt (its creation event stays in the event stream). next_fire_at goes back to it when
-- the job stays active on the same fire times, and the scheduler writes it again as the job now is.
-- Clearing ahead_at withdraws it too (triggerJob does, so that a manual run and the occurrence
-- follow the overlap policy as they would have). Once due, or claimed, it is an ordinary pending
-- execution and stays.
create function jobgate_withdraw_ahead() returns trigger language plpgsql as $$
begin
  delete from executions e
  where e.workspace_id = old.workspace_id and e.endpoint_id = old.endpoint_id and e.job_id = old.id
    and e.scheduled_for = old.ahead_at and e.trigger = 'SCHEDULE' and e.status = 'PENDING' and e.attempt_count = 0;
  if not found then return new; end if;
  if new.status = 'ACTIVE'
     and (new.cron_expression, new.timezone, new.starts_at) is not distinct from (old.cron_expression, old.timezone, old.starts_at) then
    new.next_fire_at := case when new.ends_at is null or old.ahead_at < new.ends_at then old.ahead_at end;
  end if;
  new.ahead_at := null;
  return new;
end $$;

-- One condition per column, not a row comparison: Postgres stores that as nested ORs, which its
-- own dump does not read back the same (test/db/schema-dump.test.ts).
create trigger jobs_withdraw_ahead before update on jobs for each row
  when (old.ahead_at > now() and (
        new.status is distinct from old.status
        or new.input is distinct from old.input
        or new.endpoint_id is distinct from old.endpoint_id
        or new.max_attempts is distinct from old.max_attempts
        or new.priority is distinct from old.priority
        or new.concurrency_key is distinct from old.concurrency_key
        or new.lock_key is distinct from old.lock_key
        or new.cron_expression is distinct from old.cron_expression
        or new.timezone is distinct from old.timezone
        or new.starts_at is distinct from old.starts_at
        or new.ends_at is distinct from old.ends_at
        or new.overlap_policy is distinct from old.overlap_policy
        or new.ahead_at is distinct from old.ahead_at))
  execute function jobgate_withdraw_ahead();

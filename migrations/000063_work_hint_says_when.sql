-- The work hint sent on an insert into executions (000002) says when the new work is due.
--
-- It said only "work": every idle worker claimed at once, and when its claim came back short, read
-- the next due time to arm its timer. For a delayed execution (a DELAYED job, a cron occurrence
-- written ahead) nothing was claimable, so N idle workers ran N empty claims and N reads for each
-- insert, on the database that was taking the insert: an idle worker made createJob of a DELAYED
-- job take 2.5-3.3 ms against 1.6-1.8 ms with no worker running (docs/decisions/engine-cost-per-execution.md).
--
-- Now the trigger reads the inserted rows (a transition table) and sends
--  - '' when any of them is claimable now, as before;
--  - 'due:<ms>' when the earliest is due that many milliseconds after the insert: a worker arms its
--    due timer from it without a claim (src/service/engine/worker/due-timer.ts). Counted on the
--    clock at the insert (clock_timestamp(), not the transaction's start: a row due while a long
--    transaction ran is due now), so a transaction that stays open after the insert delays the
--    wake by as long, as a worker's own due timer is late by its read's round trip; the poll
--    still covers a lost hint;
--  - nothing when none is claimable at all (every row blocked on a prerequisite, none inserted
--    under `on conflict do nothing`, or due at 'infinity'). What unblocks them sends its own hint
--    (jobgate_settle_dependents).
-- A worker of an earlier version reads 'due:<ms>' as work, as any payload it does not know, and
-- claims as before.
create or replace function jobgate_notify_work() returns trigger language plpgsql as $$
declare
  due timestamptz;
  inserted_at timestamptz := clock_timestamp();
begin
  select min(i.run_after) into due from inserted_executions i where i.status = 'PENDING' and not i.blocked;
  if due is null or due = 'infinity' then
    return null;
  elsif due <= inserted_at then
    perform pg_notify('jobgate_work', '');
  else
    -- At most 15 digits (a worker reads more as plain work); a hint past its poll is left to it anyway.
    perform pg_notify('jobgate_work', 'due:' || least(ceil(extract(epoch from due - inserted_at) * 1000), 999999999999999)::bigint);
  end if;
  return null;
end $$;

drop trigger executions_notify_insert on executions;
create trigger executions_notify_insert after insert on executions
  referencing new table as inserted_executions
  for each statement execute function jobgate_notify_work();

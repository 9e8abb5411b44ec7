-- What the end of a prerequisite or of a batch member does, in a lock order that closes no cycle.
--
-- 000047 and 000048 did it in a row trigger, in the worker's outcome statement, which holds the
-- executions it ends (locked in id order) while the triggers run. Two orders in it could close a
-- cycle with another transaction:
--  - A member was marked counted on its job (jobs.batch_outcome): the worker took the execution,
--    then the job, where every job mutation (cancelJob, cancelBatch) takes the job, then its
--    executions. Cancelling a member while a worker ended it was a deadlock (SQLSTATE 40P01).
--  - Row triggers fire in the order the rows were updated, not by id: a statement ending members
--    of batches 1 and 2 took batch 1's row then batch 2's, another statement the other way round.
--    Outcome flushes of workers draining several batches at once deadlocked, and a lost flush is a
--    handler run again. The same held for the dependents' jobs of several prerequisites.
--
-- Now a member's mark lives on its scheduled execution (executions.batch_outcome), set by a BEFORE
-- trigger on the row the worker already holds; and one statement trigger does, for all the rows
-- the statement ended, first the dependents (their jobs locked in id order, then settled), then
-- the batches (their rows locked in id order, each counted once and completed if it is the end).
-- jobs.batch_outcome is no longer written or read; it stays (unused) until a later migration, so
-- that gateways still on the previous version during an upgrade do not fail on it.
alter table executions add column batch_outcome text
  constraint executions_batch_outcome_check check (batch_outcome in ('SUCCEEDED', 'FAILED', 'CANCELLED'));
comment on column executions.batch_outcome is
  'A batch member''s scheduled execution: how it first ended, counted into its batch once (a re-drive does not count again); null before, and for every other execution.';
comment on column jobs.batch_outcome is 'No longer used (000051: executions.batch_outcome); dropped by a later migration.';

update executions e set batch_outcome = j.batch_outcome
from jobs j
where j.id = e.job_id and j.batch_outcome is not null and e.trigger = 'SCHEDULE';

-- Marks a member's first end on its own row: the statement trigger below counts it.
create function jobgate_batch_member_ends() returns trigger language plpgsql as $$
begin
  -- jobs.batch_id never changes once the job exists; a plain read takes no lock.
  if exists (select 1 from jobs j where j.id = new.job_id and j.batch_id is not null) then
    new.batch_outcome := new.status;
  end if;
  return new;
end $$;

create trigger executions_batch_member_ends before update of status on executions
  for each row
  when (new.has_dependents and new.trigger = 'SCHEDULE' and new.batch_outcome is null
        and new.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') and old.status is distinct from new.status)
  execute function jobgate_batch_member_ends();

drop trigger executions_prerequisite_ended on executions;
drop function jobgate_prerequisite_ended();

-- The executions this statement ended that others wait on (has_dependents): their dependents
-- settled, then their batches counted. Every statement that ends executions fires it; one that
-- ended none marked has_dependents leaves at the first check.
create function jobgate_executions_ended() returns trigger language plpgsql as $$
declare
  dependents uuid[];
  b record;
begin
  if not exists (select 1 from new_rows n where n.has_dependents) then return null; end if;

  -- Prerequisites ended: their open edges get the outcome, and the dependents are settled. The
  -- dependents' jobs are locked in id order, after the executions this statement holds.
  select array_agg(l.id order by l.id) into dependents from (
    select j.id from jobs j
    where j.id in (
      select d.job_id from job_dependencies d
      where d.outcome is null and d.prerequisite_id in (
        select n.job_id from new_rows n join old_rows o on o.id = n.id
        where n.has_dependents and n.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') and o.status is distinct from n.status))
    order by j.id for no key update
  ) l;
  if dependents is not null then
    update job_dependencies d set outcome = n.status, resolved_at = now()
    from new_rows n join old_rows o on o.id = n.id
    where n.has_dependents and n.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') and o.status is distinct from n.status
      and d.prerequisite_id = n.job_id and d.outcome is null and d.job_id = any(dependents);
    perform jobgate_settle_dependents(dependents);
  end if;

  -- Members marked just now (the BEFORE trigger), counted per batch, batches in id order.
  for b in
    select j.batch_id as id,
           count(*) filter (where n.batch_outcome = 'SUCCEEDED') as succeeded,
           count(*) filter (where n.batch_outcome = 'FAILED') as failed,
           count(*) filter (where n.batch_outcome = 'CANCELLED') as cancelled
    from new_rows n join old_rows o on o.id = n.id join jobs j on j.id = n.job_id
    where n.has_dependents and n.batch_outcome is not null and o.batch_outcome is null and j.batch_id is not null
    group by j.batch_id
    order by j.batch_id
  loop
    update batches set succeeded = succeeded + b.succeeded, failed = failed + b.failed, cancelled = cancelled + b.cancelled,
                       updated_at = now()
    where id = b.id;
    perform jobgate_complete_batch(b.id);
  end loop;
  return null;
end $$;

create trigger executions_ended after update on executions
  referencing old table as old_rows new table as new_rows
  for each statement execute function jobgate_executions_ended();

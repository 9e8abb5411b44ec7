-- A batch member's counted outcome moves from its job to its scheduled execution.
--
-- 000048 marked a member counted by updating its job (jobs.batch_outcome) from the trigger that
-- runs in the worker's outcome transaction, which holds the member's execution: the worker took
-- the execution, then the job. Every job mutation (cancelJob, cancelBatch) takes the job, then its
-- executions. A cancel of a member while a worker ended it was a deadlock, one side's transaction
-- lost (SQLSTATE 40P01). The mark now lives on the execution the worker already holds, set by a
-- BEFORE trigger on that row, so counting a member takes no lock but the batch's row.
alter table executions add column batch_outcome text
  constraint executions_batch_outcome_check check (batch_outcome in ('SUCCEEDED', 'FAILED', 'CANCELLED'));
comment on column executions.batch_outcome is
  'A batch member''s scheduled execution: how it first ended, counted into its batch once (a re-drive does not count again); null before, and for every other execution.';

update executions e set batch_outcome = j.batch_outcome
from jobs j
where j.id = e.job_id and j.batch_outcome is not null and e.trigger = 'SCHEDULE';

alter table jobs drop column batch_outcome;

-- Marks a member's first end on its own row (the worker holds it): the AFTER trigger below counts
-- the member when the mark appears. Only executions marked has_dependents reach the function.
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

-- A marked execution ended: as a prerequisite (000047), and as a batch member, counted once (the
-- mark set just now by the BEFORE trigger above).
create or replace function jobgate_prerequisite_ended() returns trigger language plpgsql as $$
declare
  dependents uuid[];
  member_of uuid;
begin
  if new.batch_outcome is not null and old.batch_outcome is null then
    select batch_id into member_of from jobs where id = new.job_id;
    update batches set succeeded = succeeded + (new.batch_outcome = 'SUCCEEDED')::int,
                       failed = failed + (new.batch_outcome = 'FAILED')::int,
                       cancelled = cancelled + (new.batch_outcome = 'CANCELLED')::int,
                       updated_at = now()
    where id = member_of;
    perform jobgate_complete_batch(member_of);
  end if;

  select array_agg(l.id order by l.id) into dependents from (
    select j.id from jobs j
    where j.id in (select d.job_id from job_dependencies d where d.prerequisite_id = new.job_id and d.outcome is null)
    order by j.id for no key update
  ) l;
  if dependents is null then return null; end if;
  update job_dependencies d set outcome = new.status, resolved_at = now()
  where d.prerequisite_id = new.job_id and d.outcome is null and d.job_id = any(dependents);
  perform jobgate_settle_dependents(dependents);
  return null;
end $$;

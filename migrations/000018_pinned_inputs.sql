-- Pinned inputs: an execution keeps the input it was created with, and each attempt records the
-- HTTP target it actually called.
--
-- Until now a worker read the job's input when it claimed an execution, so editing a job changed
-- its pending executions and the retries of a running one. From here an execution is delivered
-- with its own copy, taken when it is created (the job's creation, a cron occurrence, a trigger);
-- updateJob changes only executions created after it.

alter table executions add column input jsonb;
comment on column executions.input is
  'The input delivered, pinned when the execution was created; null only for executions that had finished before migration 000018 (their input at the time is not known).';

-- Every way of creating an execution pins the job's input, including ones that do not name the
-- column (bulk inserts, older code): a BEFORE trigger fills it from the job, and only when the
-- insert left it null, so paths that pass it pay no lookup.
create function jobgate_pin_execution_input() returns trigger language plpgsql as $$
begin
  select j.input into new.input from jobs j where j.id = new.job_id;
  return new;
end $$;
create trigger executions_pin_input before insert on executions
  for each row when (new.input is null) execute function jobgate_pin_execution_input();

-- Executions not finished yet are pinned to their job's input as it is now: what they would have
-- been delivered with, had they been claimed a moment before this migration.
update executions e set input = j.input
from jobs j
where j.id = e.job_id and e.status in ('PENDING', 'RUNNING') and e.input is null;

-- What an attempt called: url, method and headers as sent, secret config values redacted. Null
-- for handler attempts, attempts that never built a request, and attempts before 000018.
alter table attempts add column target jsonb;

-- A new execution's gated and job_held flags, given by the statement that creates jobs.
--
-- Every insert into executions ran the gate trigger (000044, 000055) for each row: a read of its
-- endpoint FOR SHARE and a read of its job, in PL/pgSQL. createJob's one statement
-- (src/db/statements/create-job.ts), which writes createJob and createJobs, spent 8.5 ms of a
-- 1,000-job createJobs' 64 ms there (auto_explain), reading for each row the one endpoint it had
-- already read FOR SHARE, and a job it had just inserted. That statement now gives both flags:
-- gated from the endpoint row it holds FOR SHARE (jobgate_endpoint_limited of the version it
-- locked, as the trigger reads it), job_held false (a job it inserts is ACTIVE, and its execution a
-- SCHEDULE trigger). The trigger fills in what an insert leaves out, so every other statement that
-- creates executions (cron occurrences, alert deliveries, re-drives) goes on as before; the rule
-- for an execution that becomes PENDING by an update is unchanged.
--
-- The flags have no default any more: a null is what the trigger fills in. They stay NOT NULL,
-- which Postgres checks after BEFORE triggers.
create or replace function jobgate_execution_gate() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' and new.status <> 'PENDING' then
    -- Not pending: neither flag applies (what the defaults gave before).
    new.gated := coalesce(new.gated, false);
    new.job_held := coalesce(new.job_held, false);
    return new;
  end if;
  if tg_op = 'UPDATE' or new.gated is null then
    select jobgate_endpoint_limited(en) into new.gated from endpoints en where en.id = new.endpoint_id for share;
    new.gated := coalesce(new.gated, false);
  end if;
  if tg_op = 'UPDATE' or new.job_held is null then
    select not (j.status = 'ACTIVE' or (j.status = 'PAUSED' and new.trigger = 'MANUAL')) into new.job_held
    from jobs j where j.id = new.job_id;
    new.job_held := coalesce(new.job_held, false);
  end if;
  return new;
end $$;

alter table executions alter column gated drop default, alter column job_held drop default;

drop trigger executions_gate_insert on executions;
create trigger executions_gate_insert before insert on executions
  for each row when (new.gated is null or new.job_held is null) execute function jobgate_execution_gate();

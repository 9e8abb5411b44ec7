-- Whether an execution's job lets it run, kept on the execution, so that the claim reads no job.
--
-- The unlimited claim (src/db/statements/claim.ts) read each candidate's job by primary key, to
-- leave paused jobs' executions. Its plan is prepared once per connection and kept until a table
-- is analyzed: made while jobs held a few hundred rows (a page or two), it read the job with a
-- sequential scan of the whole table. After a burst of 20,000 jobs, before the next ANALYZE, a
-- claim took 2 ms a candidate, and a claim walking past rows other workers had just taken read
-- thousands: 42 s for one claim, measured with eight worker processes. Its snapshot still showed
-- those rows PENDING, so it locked each one it walked past (the lock is kept when the recheck
-- drops the row), and the other workers' outcomes and heartbeats on those rows waited for it: one
-- worker drained at a time, 320-700 executions a second instead of 2,000-3,000.
--
-- job_held is set when an execution becomes PENDING (created, retried, handed back, re-driven),
-- from its job's status, and on a job's status change for its PENDING executions: the same rule as
-- JOB_RUNS in claim-gates.ts, an ACTIVE job's executions run, a PAUSED job's only when triggered by
-- hand. The status change locks the job's RUNNING executions too: one becoming PENDING meanwhile
-- (a retry, a hand-back) read the job's status before the change committed, so the change waits
-- for it and then sets its flag. Jobs first, then their executions in id order, the order every
-- job mutation locks in (cancelJob); the execution's side reads its job without a lock, so the two
-- never wait on each other in a cycle.
alter table executions add column job_held boolean not null default false;

comment on column executions.job_held is
  'PENDING and its job does not let it run (paused, and not triggered by hand; or retired): never claimed. Kept by triggers from the job''s status.';

update executions e set job_held = true
from jobs j
where j.id = e.job_id and e.status = 'PENDING'
  and not (j.status = 'ACTIVE' or (j.status = 'PAUSED' and e.trigger = 'MANUAL'));

create or replace function jobgate_execution_gate() returns trigger language plpgsql as $$
begin
  select jobgate_endpoint_limited(en) into new.gated from endpoints en where en.id = new.endpoint_id for share;
  new.gated := coalesce(new.gated, false);
  select not (j.status = 'ACTIVE' or (j.status = 'PAUSED' and new.trigger = 'MANUAL')) into new.job_held
  from jobs j where j.id = new.job_id;
  new.job_held := coalesce(new.job_held, false);
  return new;
end $$;

create function jobgate_job_held() returns trigger language plpgsql as $$
begin
  -- Its live executions locked first, in id order, as every statement that locks several
  -- (src/db/statements/lease.ts): this waits for one becoming PENDING right now, and the update
  -- below, a statement of its own, then sees it.
  perform 1 from executions x
  where x.workspace_id = new.workspace_id and x.endpoint_id = new.endpoint_id and x.job_id = new.id
    and x.status in ('PENDING', 'RUNNING')
  order by x.id for no key update;
  update executions e set job_held = not (new.status = 'ACTIVE' or (new.status = 'PAUSED' and e.trigger = 'MANUAL'))
  where e.workspace_id = new.workspace_id and e.endpoint_id = new.endpoint_id and e.job_id = new.id
    and e.status = 'PENDING'
    and e.job_held <> not (new.status = 'ACTIVE' or (new.status = 'PAUSED' and e.trigger = 'MANUAL'));
  return null;
end $$;

create trigger jobs_held after update of status on jobs for each row
  when (old.status is distinct from new.status)
  execute function jobgate_job_held();

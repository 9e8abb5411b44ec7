-- Execution engine: routing columns, lock keys, cancellation, manual triggers, the backoff
-- function shared by every path that schedules a retry, and the work-available notification.

alter table jobs add column lock_key text check (lock_key <> '');

alter table executions
  add column endpoint_id uuid,
  add column lock_key text,
  add column cancel_requested_at timestamptz,
  -- Set by triggerJob: a retry of the same request returns the same execution.
  add column request_id text check (request_id <> ''),
  add column trigger text not null default 'SCHEDULE' check (trigger in ('SCHEDULE', 'MANUAL'));

update executions e set endpoint_id = j.endpoint_id from jobs j where j.id = e.job_id;
alter table executions alter column endpoint_id set not null;
alter table executions add foreign key (workspace_id, endpoint_id) references endpoints (workspace_id, id);

-- A re-driven execution gets a fresh budget on top of the attempts it already made, so its
-- total may pass the per-job maximum of 100.
alter table executions drop constraint executions_max_attempts_check;
alter table executions add constraint executions_max_attempts_check check (max_attempts >= 1);

create unique index executions_request_id on executions (job_id, request_id);

-- The authority on lock keys: at most one pending or running execution per key and workspace.
create unique index executions_live_lock_key on executions (workspace_id, lock_key)
  where lock_key is not null and status in ('PENDING', 'RUNNING');

-- The claim path: due pending work, oldest first.
drop index executions_due;
create index executions_due on executions (run_after, id) where status = 'PENDING';
-- The reconciler: running work whose lease ran out.
create index executions_lease on executions (lease_expires_at) where status = 'RUNNING';
-- Concurrency limits count running attempts per endpoint.
create index executions_running_endpoint on executions (endpoint_id) where status = 'RUNNING';

create index attempts_execution_epoch on attempts (execution_id, lease_epoch);

-- Exponential backoff with optional full jitter, in milliseconds, for the retry after attempt
-- number `attempt` (1-based): min(max_ms, base_ms * 2^(attempt-1)), then uniform in [0, that]
-- when jittered. One definition for the worker's completions and the reconciler.
create function jobgate_backoff_ms(base_ms integer, max_ms integer, attempt integer, jitter boolean)
returns double precision language sql volatile as $$
  select case when jitter then random() else 1 end
       * least(max_ms::double precision, base_ms * power(2::double precision, greatest(attempt - 1, 0)))
$$;

-- Work became available (a new pending execution, or one due again): wake the workers.
-- Statement-level, so a bulk insert sends one notification, inside the writing transaction.
create function jobgate_notify_work() returns trigger language plpgsql as $$
begin
  perform pg_notify('jobgate_work', '');
  return null;
end $$;

create trigger executions_notify_insert after insert on executions
  for each statement execute function jobgate_notify_work();

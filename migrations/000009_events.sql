-- Live events: the record that subscriptions replay, and the NOTIFY hints that wake them.
--
-- Every state change a subscription shows is written here by triggers, in the transaction that
-- makes the change, so a subscriber never sees what was rolled back and no writer (service,
-- worker, reconciler, reaper, a future path) can forget to emit. The triggers are
-- statement-level with transition tables: a batched claim or completion of N executions writes
-- N event rows in one INSERT ... SELECT and sends one notification, not N.
--
-- NOTIFY is only a hint ("something new in events" / "in findings" / "run <id> moved"); the
-- rows are the record. Payloads are a letter and at most a uuid, far below the 8,000-byte limit.
-- Ids are increasing but, like any sequence, not in commit order; readers only deliver ids
-- below a stable watermark (see src/subscriptions/watermark.ts), so none is skipped. To know
-- which open transactions may still hold an id, every writer of events or findings takes a
-- shared advisory lock (jobgate_event_writer) before it takes one and keeps it to its end:
-- shared locks never wait on each other, and a reader finds exactly the open writers in
-- pg_locks. Other open transactions, however long, never hold live delivery back.

-- Marks the calling transaction as a writer of events until it ends. The key (27239 = 'jg', 1)
-- is read by src/db/queries/events.ts.
create function jobgate_event_writer() returns void language sql volatile as $$
  select pg_advisory_xact_lock_shared(27239, 1)
$$;

create table events (
  id               bigint generated always as identity primary key,
  -- No foreign keys: events are an append-only log, pruned by age; they must stay cheap to write.
  workspace_id     uuid not null,
  topic            text not null check (topic in ('EXECUTION', 'JOB', 'RUN')),
  -- The execution, job or run that changed.
  subject_id       uuid not null,
  -- Executions: their job and endpoint; jobs: their endpoint; runs: null.
  job_id           uuid,
  endpoint_id      uuid,
  -- Runs: the run's name.
  name             text,
  status           text not null,
  -- null when the subject was created.
  previous_status  text,
  attempt_count    integer,
  created_at       timestamptz not null default now()
);
-- Retention deletes by age; a BRIN index costs almost nothing to keep on an append-only table.
create index events_created on events using brin (created_at);

-- Executions: created, and every status change (claimed, retried, finished, cancelled).
create function jobgate_events_executions_insert() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, attempt_count)
  select n.workspace_id, 'EXECUTION', n.id, n.job_id, n.endpoint_id, n.status, n.attempt_count
  from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

create function jobgate_events_executions_update() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status, attempt_count)
  select n.workspace_id, 'EXECUTION', n.id, n.job_id, n.endpoint_id, n.status, o.status, n.attempt_count
  from new_rows n join old_rows o on o.id = n.id
  where n.status is distinct from o.status
  order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

create trigger executions_events_insert after insert on executions
  referencing new table as new_rows
  for each statement execute function jobgate_events_executions_insert();
create trigger executions_events_update after update on executions
  referencing old table as old_rows new table as new_rows
  for each statement execute function jobgate_events_executions_update();

-- Jobs: created, paused, resumed, retired.
create function jobgate_events_jobs_insert() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status)
  select n.workspace_id, 'JOB', n.id, n.id, n.endpoint_id, n.status from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

create function jobgate_events_jobs_update() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status)
  select n.workspace_id, 'JOB', n.id, n.id, n.endpoint_id, n.status, o.status
  from new_rows n join old_rows o on o.id = n.id
  where n.status is distinct from o.status
  order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

create trigger jobs_events_insert after insert on jobs
  referencing new table as new_rows
  for each statement execute function jobgate_events_jobs_insert();
create trigger jobs_events_update after update on jobs
  referencing old table as old_rows new table as new_rows
  for each statement execute function jobgate_events_jobs_update();

-- Runs: status changes are events; progress (a checkpoint) is only a hint naming the run, since
-- a progress bar wants the latest state, which it reads from the run itself. Heartbeats, which
-- change neither, send nothing.
create function jobgate_events_runs_insert() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, name, status)
  select n.workspace_id, 'RUN', n.id, n.name, n.status from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

create function jobgate_events_runs_update() returns trigger language plpgsql as $$
declare
  moved record;
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, name, status, previous_status)
  select n.workspace_id, 'RUN', n.id, n.name, n.status, o.status
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

create trigger runs_events_insert after insert on runs
  referencing new table as new_rows
  for each statement execute function jobgate_events_runs_insert();
create trigger runs_events_update after update on runs
  referencing old table as old_rows new table as new_rows
  for each statement execute function jobgate_events_runs_update();

-- Findings are rows already (their id is the cursor); a new one only needs the hint. Their ids
-- are taken as rows are inserted, so the writer mark comes before, in a BEFORE trigger.
create function jobgate_events_findings_mark() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  return null;
end $$;

create function jobgate_events_findings_insert() returns trigger language plpgsql as $$
begin
  perform 1 from new_rows limit 1;
  if found then perform pg_notify('jobgate_events', 'f'); end if;
  return null;
end $$;

create trigger findings_events_mark before insert on findings
  for each statement execute function jobgate_events_findings_mark();
create trigger findings_events_insert after insert on findings
  referencing new table as new_rows
  for each statement execute function jobgate_events_findings_insert();

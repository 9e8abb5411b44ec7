-- Batches (fan-out and fan-in): jobs created together, or added while the batch is open, and one
-- onComplete job that runs once every member has ended, with the batch's counts.
--
-- The onComplete job is created with the batch, its execution blocked (000047) until the batch
-- completes: so it exists exactly once, whatever happens later, and completing the batch is one
-- update of rows that exist. A member's scheduled execution is marked has_dependents, so its end
-- runs executions_prerequisite_ended, which counts it into its batch once (jobs.batch_outcome,
-- set once: a re-drive of a failed member does not count it again) and completes the batch when
-- it is closed and every member is counted. Counting and completing hold the batch's row lock:
-- the last two members ending at once on two workers complete it once.
create table batches (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  key text constraint batches_key_check check (key <> '' and length(key) <= 200),
  name text constraint batches_name_check check (length(name) between 1 and 200),
  -- Members may be added while open; it completes only once closed.
  open boolean not null,
  total integer not null default 0,
  succeeded integer not null default 0,
  failed integer not null default 0,
  cancelled integer not null default 0,
  on_complete_job_id uuid references jobs (id) on delete set null,
  completed_at timestamptz,
  created_by_key_id uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint batches_counted check (succeeded + failed + cancelled <= total),
  constraint batches_completed check (completed_at is null or (not open and succeeded + failed + cancelled = total))
);
comment on table batches is 'Jobs created together (fan-out) and the onComplete job that runs once all of them ended (fan-in).';
create unique index batches_key on batches (workspace_id, key) where key is not null;
create index batches_workspace_created on batches (workspace_id, created_at desc, id desc);
create index batches_on_complete on batches (on_complete_job_id) where on_complete_job_id is not null;

alter table jobs add column batch_id uuid references batches (id) on delete set null;
comment on column jobs.batch_id is 'The batch this job is a member of; null: none.';
alter table jobs add column batch_outcome text
  constraint jobs_batch_outcome_check check (batch_outcome in ('SUCCEEDED', 'FAILED', 'CANCELLED'));
comment on column jobs.batch_outcome is 'A batch member: how its scheduled execution ended, counted into its batch once; null while it has not.';
create index jobs_batch on jobs (batch_id, id) where batch_id is not null;

-- Completes batch `b` if it is closed and every member is counted, and not already: writes the
-- counts into its onComplete job's waiting execution (under "batch" when the input is an object)
-- and settles that job (jobgate_settle_dependents releases it: no batch holds it any more).
-- The caller holds the batch's row lock.
create function jobgate_complete_batch(b uuid) returns void language plpgsql as $$
declare
  done batches;
begin
  update batches set completed_at = now(), updated_at = now()
  where id = b and not open and completed_at is null and succeeded + failed + cancelled = total
  returning * into done;
  if done.id is null or done.on_complete_job_id is null then return; end if;
  perform 1 from jobs where id = done.on_complete_job_id for no key update;
  update executions e
  set input = case when jsonb_typeof(e.input) = 'object'
                   then e.input || jsonb_build_object('batch', jsonb_build_object(
                          'id', done.id, 'total', done.total, 'succeeded', done.succeeded, 'failed', done.failed, 'cancelled', done.cancelled))
                   else e.input end,
      updated_at = now()
  where e.job_id = done.on_complete_job_id and e.blocked and e.status = 'PENDING';
  perform jobgate_settle_dependents(array[done.on_complete_job_id]);
end $$;

-- What holds a dependent back, now also a batch that has not completed (its onComplete job).
create or replace function jobgate_settle_dependents(dependents uuid[]) returns void language plpgsql as $$
begin
  with failed as (
    select j.id,
           (select 'prerequisite job ' || d.prerequisite_id || ' ended ' || d.outcome
            from job_dependencies d
            where d.job_id = j.id and d.outcome in ('FAILED', 'CANCELLED')
            order by d.resolved_at, d.prerequisite_id limit 1) as why
    from jobs j
    where j.id = any(dependents) and j.status <> 'RETIRED' and j.on_prerequisite_failure = 'CANCEL'
      and exists (select 1 from job_dependencies d where d.job_id = j.id and d.outcome in ('FAILED', 'CANCELLED'))
  ), retired as (
    -- Run whether or not it is read, as every data-modifying WITH.
    update jobs j set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
    from failed f where j.id = f.id
    returning j.id
  ), locked as materialized (
    -- In id order, as every statement that locks several executions (src/db/statements/lease.ts).
    select e.id from executions e where e.job_id in (select id from failed) and e.blocked and e.status = 'PENDING'
    order by e.id for no key update
  )
  update executions e
  set status = 'CANCELLED', blocked = false, finished_at = now(), updated_at = now(),
      last_error = (select f.why from failed f where f.id = e.job_id)
  from locked l
  where e.id = l.id;

  with released as (
    select e.id from executions e
    where e.job_id = any(dependents) and e.blocked and e.status = 'PENDING'
      and not exists (select 1 from job_dependencies d where d.job_id = e.job_id and d.outcome is null)
      and not exists (select 1 from batches b where b.on_complete_job_id = e.job_id and b.completed_at is null)
    order by e.id for no key update
  )
  update executions e set blocked = false, updated_at = now()
  from released r where e.id = r.id;
  -- Released work may be due now: wake the workers, inside this transaction.
  if found then perform pg_notify('jobgate_work', ''); end if;
end $$;

-- A marked execution ended: as a prerequisite (000047), and as a batch member, counted once.
create or replace function jobgate_prerequisite_ended() returns trigger language plpgsql as $$
declare
  dependents uuid[];
  member_of uuid;
begin
  if new.trigger = 'SCHEDULE' then
    update jobs set batch_outcome = new.status
    where id = new.job_id and batch_id is not null and batch_outcome is null
    returning batch_id into member_of;
    if member_of is not null then
      update batches set succeeded = succeeded + (new.status = 'SUCCEEDED')::int,
                         failed = failed + (new.status = 'FAILED')::int,
                         cancelled = cancelled + (new.status = 'CANCELLED')::int,
                         updated_at = now()
      where id = member_of;
      perform jobgate_complete_batch(member_of);
    end if;
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

-- Dependencies between jobs (workflows): a job created with prerequisites starts only once each of
-- them has SUCCEEDED. A prerequisite is an IMMEDIATE or DELAYED job, and what counts is its
-- scheduled execution (the one it was created with; "Run now" executions are extra runs and do
-- not count). A dependent names its prerequisites when it is created, and they exist by then, so
-- the graph has no cycle by construction.
--
-- The dependent's execution is PENDING and `blocked` until its prerequisites are settled: blocked
-- executions are out of the claim's indexes, so a claim never reads past them, however many wait.
-- When a prerequisite's execution ends (the trigger below, in the transaction that ends it), its
-- edges take its outcome, and each dependent is settled: released when every prerequisite has an
-- outcome (and, under CANCEL, none failed), or retired with its waiting execution cancelled when
-- one FAILED or was CANCELLED and its policy is CANCEL. The outcome is settled once: a prerequisite
-- re-driven after it failed does not bring back a dependent already cancelled.
alter table jobs add column on_prerequisite_failure text
  constraint jobs_on_prerequisite_failure_check check (on_prerequisite_failure in ('CANCEL', 'RUN'));
comment on column jobs.on_prerequisite_failure is
  'What happens to this job when a prerequisite FAILED or was CANCELLED: CANCEL retires it, RUN starts it anyway; null: it has no prerequisites.';

create table job_dependencies (
  job_id uuid not null references jobs (id) on delete cascade,
  prerequisite_id uuid not null references jobs (id) on delete cascade,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  -- Null while the prerequisite's scheduled execution has not ended.
  outcome text constraint job_dependencies_outcome_check check (outcome in ('SUCCEEDED', 'FAILED', 'CANCELLED')),
  resolved_at timestamptz,
  -- Its place in the dependent's dependsOn (1-based), which Job.dependsOn keeps.
  position smallint not null,
  created_at timestamptz not null default now(),
  primary key (job_id, prerequisite_id),
  constraint job_dependencies_not_itself check (job_id <> prerequisite_id),
  constraint job_dependencies_resolved check ((outcome is null) = (resolved_at is null))
);
comment on table job_dependencies is 'Job `job_id` starts only once job `prerequisite_id` has an outcome (and under CANCEL, a SUCCEEDED one).';
create index job_dependencies_prerequisite on job_dependencies (prerequisite_id, job_id);

alter table executions add column blocked boolean not null default false;
comment on column executions.blocked is
  'PENDING and waiting for its job''s prerequisites (job_dependencies): never claimed, out of the claim''s indexes. Cleared when they are settled.';
alter table executions add column has_dependents boolean not null default false;
comment on column executions.has_dependents is
  'A job depends on this execution''s outcome: its end settles them (executions_prerequisite_ended). False for nearly all, so the trigger costs other executions nothing.';

-- The claim's indexes hold only what a claim may take: not blocked.
drop index executions_due_priority;
create index executions_due_priority on executions (priority desc, run_after, id) where status = 'PENDING' and not gated and not blocked;
drop index executions_gated_due;
create index executions_gated_due on executions (endpoint_id, priority desc, run_after, id) where status = 'PENDING' and gated and not blocked;
drop index executions_pending_key;
create index executions_pending_key on executions (endpoint_id, concurrency_key, priority desc, run_after, id)
  where status = 'PENDING' and gated and not blocked;
-- What waits, by job (settling and waitingFor read it).
create index executions_blocked on executions (job_id) where blocked;

-- Settles the dependent jobs `dependents`, whose rows the caller has locked: a job whose
-- prerequisites all have an outcome is released, unless its policy is CANCEL and one of them
-- FAILED or was CANCELLED, which retires it and cancels its waiting execution instead. A job with
-- a prerequisite still open is left as it is. The one definition of what a settled prerequisite
-- means, for the trigger and for a job created after its prerequisites ended.
create function jobgate_settle_dependents(dependents uuid[]) returns void language plpgsql as $$
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
    order by e.id for no key update
  )
  update executions e set blocked = false, updated_at = now()
  from released r where e.id = r.id;
  -- Released work may be due now: wake the workers, inside this transaction.
  if found then perform pg_notify('jobgate_work', ''); end if;
end $$;

-- A prerequisite's scheduled execution ended: its dependents' edges take its outcome, and the
-- dependents are settled. Their job rows are locked first, in id order: two prerequisites of one
-- job ending at once settle it one after the other, and the second (a new snapshot for each
-- statement, under READ COMMITTED) sees the first's outcome. Each statement of this function sees
-- the dependents committed before it ran: createJob marks the prerequisite's execution
-- (has_dependents) under its row lock, which the update that ends it waits for.
create function jobgate_prerequisite_ended() returns trigger language plpgsql as $$
declare
  dependents uuid[];
begin
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

create trigger executions_prerequisite_ended after update of status on executions
  for each row
  when (new.has_dependents and new.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') and old.status is distinct from new.status)
  execute function jobgate_prerequisite_ended();

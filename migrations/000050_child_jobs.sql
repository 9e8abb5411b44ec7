-- Child jobs: a job created as a child of an execution (typically by that execution's handler, in
-- its fenced transaction) belongs to it: the parent's progress is its children's, and cancelling
-- the parent (its execution cancelled, or asked to abort) cancels its unfinished children, and
-- theirs in turn.
--
-- A child and its parent's cancellation take turns on one row of execution_children, the
-- parent's, never on the parent execution's own row (a lock there would hold up its worker's
-- heartbeats for as long as the handler's transaction lasts). A child being created upserts the
-- row and is refused if it says cancelled; a cancellation upserts it with cancelled = true, which
-- waits for a child's uncommitted upsert and then, in its next statement, sees that child. So a
-- child created while its parent is being cancelled is either refused or cancelled with the others.
alter table jobs add column parent_execution_id uuid references executions (id) on delete set null;
comment on column jobs.parent_execution_id is 'The execution this job is a child of (its handler made it); null: none.';
create index jobs_parent_execution on jobs (parent_execution_id, id) where parent_execution_id is not null;

create table execution_children (
  parent_execution_id uuid primary key references executions (id) on delete cascade,
  -- The parent was cancelled (or asked to abort): no child may be added.
  cancelled boolean not null default false
);
comment on table execution_children is 'Where a parent execution''s children and its cancellation take turns (migration 000050).';

create function jobgate_parent_cancelled() returns trigger language plpgsql as $$
declare
  asked integer;
begin
  insert into execution_children as c (parent_execution_id, cancelled) values (new.id, true)
  on conflict (parent_execution_id) do update set cancelled = true;
  -- The children's jobs first, then their executions, in id order: the order every job mutation
  -- locks in (cancelJob), and every statement that locks several executions (src/db/statements/lease.ts).
  perform 1 from jobs j where j.parent_execution_id = new.id and j.status <> 'RETIRED' order by j.id for no key update;
  update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
  where parent_execution_id = new.id and status <> 'RETIRED';
  with locked as materialized (
    select e.id from executions e
    where e.job_id in (select j.id from jobs j where j.parent_execution_id = new.id) and e.status in ('PENDING', 'RUNNING')
    order by e.id for no key update
  ), changed as (
    update executions e
    set status = case when e.status = 'PENDING' then 'CANCELLED' else e.status end,
        blocked = false,
        finished_at = case when e.status = 'PENDING' then now() else e.finished_at end,
        last_error = case when e.status = 'PENDING' then 'parent execution ' || new.id || ' was cancelled' else e.last_error end,
        cancel_requested_at = case when e.status = 'RUNNING' then coalesce(e.cancel_requested_at, now()) else e.cancel_requested_at end,
        updated_at = now()
    from locked l
    where e.id = l.id and e.status in ('PENDING', 'RUNNING')
    returning e.id, e.status
  )
  -- A running child is asked to abort, as cancelJob asks (heartbeats carry the request too).
  select count(*) into asked from (select pg_notify('jobgate_cancel', c.id::text) from changed c where c.status = 'RUNNING') n;
  return null;
end $$;

create trigger executions_parent_cancelled after update of status, cancel_requested_at on executions
  for each row
  -- Cancellations only: completions, claims and heartbeats do not fire it.
  when ((new.status = 'CANCELLED' and old.status is distinct from 'CANCELLED')
        or (new.cancel_requested_at is not null and old.cancel_requested_at is null))
  execute function jobgate_parent_cancelled();

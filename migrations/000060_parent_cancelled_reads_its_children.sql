-- A cancelled execution's trigger (migration 000050) reads its children from their jobs, and stops
-- at once when it has none.
--
-- It looked for the children's live executions as `executions where job_id in (the children's
-- jobs) and status in ('PENDING', 'RUNNING')`, and Postgres read that from the other end: every
-- live execution of the installation through executions_workspace_live, each checked against the
-- children's jobs, twice (the lock and the update). So every cancel cost a walk of the live
-- executions, children or none: cancelling 1,000 PENDING executions, with about 3,000 live ones in
-- all, took 2.2-2.9 s, 3.4 ms a row of it in this trigger (`npm run bench -- lists`), and that grows
-- with the backlog, which is when operators cancel in bulk. Now:
--
--  - an execution with no child job stops after its turn row (almost all of them): one probe of
--    jobs_parent_execution. The turn row is still written first, so a child being created now is
--    seen by the probe or refused by the row, as before;
--  - the children's executions are read from their jobs (executions_job_created), and updated by id.
create or replace function jobgate_parent_cancelled() returns trigger language plpgsql as $$
declare
  asked integer;
begin
  insert into execution_children as c (parent_execution_id, cancelled) values (new.id, true)
  on conflict (parent_execution_id) do update set cancelled = true;
  -- The next statement's snapshot sees every child committed before the upsert above got the row.
  if not exists (select 1 from jobs j where j.parent_execution_id = new.id) then
    return null;
  end if;
  -- The children's jobs first, then their executions, in id order: the order every job mutation
  -- locks in (cancelJob), and every statement that locks several executions (src/db/statements/lease.ts).
  perform 1 from jobs j where j.parent_execution_id = new.id and j.status <> 'RETIRED' order by j.id for no key update;
  update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
  where parent_execution_id = new.id and status <> 'RETIRED';
  with locked as materialized (
    select e.id from jobs j
    join executions e on e.job_id = j.id
    where j.parent_execution_id = new.id and e.status in ('PENDING', 'RUNNING')
    order by e.id
    for no key update of e
  ), changed as (
    update executions e
    set status = case when e.status = 'PENDING' then 'CANCELLED' else e.status end,
        blocked = false,
        finished_at = case when e.status = 'PENDING' then now() else e.finished_at end,
        last_error = case when e.status = 'PENDING' then 'parent execution ' || new.id || ' was cancelled' else e.last_error end,
        cancel_requested_at = case when e.status = 'RUNNING' then coalesce(e.cancel_requested_at, now()) else e.cancel_requested_at end,
        updated_at = now()
    where e.id = any (array(select l.id from locked l)) and e.status in ('PENDING', 'RUNNING')
    returning e.id, e.status
  )
  -- A running child is asked to abort, as cancelJob asks (heartbeats carry the request too).
  select count(*) into asked from (select pg_notify('jobgate_cancel', c.id::text) from changed c where c.status = 'RUNNING') n;
  return null;
end $$;

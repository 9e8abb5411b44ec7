-- Five foreign keys whose delete actions the pruner now does itself, in the statements that
-- delete executions and jobs, once per statement instead of once per row.
--
-- Retention deletes executions and jobs (src/db/statements/pruning.ts); the only other delete is
-- of a cron occurrence written ahead of its time and withdrawn (migration 000054), which does the
-- same for its one execution (below).
-- Postgres runs a foreign key's action on the referenced side as a trigger per deleted row, each
-- a statement of its own, whether or not anything refers to the row. Measured on a batch of 1,000
-- executions (auto_explain): the statement's own work took about 10 ms, and these two keys 34 ms,
-- for children that almost no execution has. A batch of 1,000 whole one-off jobs spent about
-- 100 ms in the three keys on jobs below. The pruner now does the same work in the same statement,
-- once for the batch, through the same indexes:
--
--  - jobs.parent_execution_id (ON DELETE SET NULL): a child job outlives its pruned parent
--    execution, with no parent;
--  - execution_children.parent_execution_id (ON DELETE CASCADE): the parent's turn row goes with it;
--  - job_dependencies.job_id and .prerequisite_id (ON DELETE CASCADE): a pruned job's
--    dependencies go, as dependent and as prerequisite;
--  - batches.on_complete_job_id (ON DELETE SET NULL): a completed batch whose onComplete job was
--    pruned keeps no reference to it.
--
-- What the keys also did on insert is done where the rows are written, with the lock each key
-- took: a child's parent execution is read FOR KEY SHARE with its turn row (children.ts), and
-- prerequisite jobs FOR KEY SHARE (dependencies.ts), so a prune of them waits for the insert's
-- transaction, or the insert for the prune and then finds them gone; an onComplete job is the one
-- just inserted in the same transaction. The key that
-- makes a late execution of a job being pruned fail (executions -> jobs) stays, as does every key
-- from a row to its workspace. attempts -> executions went the same way in migration 000013.
alter table jobs drop constraint jobs_parent_execution_id_fkey;
alter table execution_children drop constraint execution_children_parent_execution_id_fkey;
alter table job_dependencies drop constraint job_dependencies_job_id_fkey;
alter table job_dependencies drop constraint job_dependencies_prerequisite_id_fkey;
alter table batches drop constraint batches_on_complete_job_id_fkey;

-- A withdrawn occurrence (PENDING, never attempted) can be a parent: a child created on it keeps no
-- reference to it, and its turn row goes, as the pruner does for what it deletes.
create or replace function jobgate_withdraw_ahead() returns trigger language plpgsql as $$
begin
  -- The writer mark before the event takes an id (src/subscriptions/hub/watermark.ts).
  perform jobgate_event_writer();
  with withdrawn as (
    delete from executions e
    where e.workspace_id = old.workspace_id and e.endpoint_id = old.endpoint_id and e.job_id = old.id
      and e.scheduled_for = old.ahead_at and e.trigger = 'SCHEDULE' and e.status = 'PENDING' and e.attempt_count = 0
    returning e.id, e.workspace_id, e.job_id, e.endpoint_id, e.attempt_count
  ), unparented as (
    update jobs j set parent_execution_id = null where j.parent_execution_id in (select id from withdrawn)
  ), gone_turns as (
    delete from execution_children c where c.parent_execution_id in (select id from withdrawn)
  )
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status, attempt_count)
  select w.workspace_id, 'EXECUTION', w.id, w.job_id, w.endpoint_id, 'CANCELLED', 'PENDING', w.attempt_count
  from withdrawn w;
  if not found then return new; end if;
  perform pg_notify('jobgate_events', 'e');
  if new.status = 'ACTIVE'
     and (new.cron_expression, new.timezone, new.starts_at) is not distinct from (old.cron_expression, old.timezone, old.starts_at) then
    new.next_fire_at := case when new.ends_at is null or old.ahead_at < new.ends_at then old.ahead_at end;
  end if;
  new.ahead_at := null;
  return new;
end $$;

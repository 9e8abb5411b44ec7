-- An attempt's row is written once, when the attempt ends, instead of inserted at claim and
-- updated at completion. The attempt in progress is the execution row itself: RUNNING, its
-- attempt_count is the attempt's number, lease_epoch and lease_owner are the attempt's, and
-- attempt_started_at (new) is when it was claimed. The execution's attempts list shows it from
-- there (src/db/repos/executions.ts). Every path that ends an attempt writes its row in the
-- statement that ends it: the completion (the worker's outcome), the reconciler (LEASE_EXPIRED).
-- A released attempt (graceful shutdown) writes none: it is given back uncounted.
--
-- On the engine benchmark this took a heap tuple, its index entries and a foreign-key check out
-- of every claim, and turned the completion's UPDATE of the attempt into an INSERT (see the
-- commit message for the figures).
--
-- Stop every jobgate process of the previous version before migrating (the README's upgrade
-- note): their claims would fail on the new schema, and their completions and reconcilers
-- would end attempts without writing a row.
--
-- Attempt ids change once: GraphQL's Attempt.id was the dropped uuid column; it is now derived
-- from (execution, number). Clients that cache attempts by id see each one as new once.
--
-- Cost on a large attempts table: the new primary key builds one index, under this
-- migration's lock; no other statement scans the table. outcome and finished_at stay
-- nullable in the column definitions, although every row written from now on has both.

alter table executions add column attempt_started_at timestamptz;

-- The attempt in progress of each RUNNING execution: its start moves to the execution and its
-- open row goes (the completion will write it).
with current as (
  update executions e
  set attempt_started_at = a.started_at
  from attempts a
  where a.execution_id = e.id and a.attempt_number = e.attempt_count and a.lease_epoch = e.lease_epoch
    and a.outcome is null and e.status = 'RUNNING'
  returning a.execution_id, a.attempt_number
)
delete from attempts a using current c where a.execution_id = c.execution_id and a.attempt_number = c.attempt_number;
-- Any other open row belongs to an attempt that ended without its outcome being written: it is
-- closed as lost, not dropped.
update attempts set outcome = 'LEASE_EXPIRED', finished_at = coalesce(finished_at, now()),
  error = coalesce(error, 'lease expired: its outcome was never recorded')
where outcome is null;

-- An attempt is identified by its execution and number; the random uuid key was one more index
-- insert per attempt, scattered across its index. GraphQL's Attempt.id is derived from the pair
-- (src/service/models.ts), so the attempt in progress and its row have the same id.
alter table attempts drop constraint attempts_pkey;
alter table attempts drop column id;
alter table attempts drop constraint attempts_execution_id_attempt_number_key;
alter table attempts add primary key (execution_id, attempt_number);

-- Written only by the statements that end an attempt, from the execution row they hold in the
-- same statement, and executions are never deleted: the reference cannot be broken, and
-- checking it was a lookup per attempt.
alter table attempts drop constraint attempts_execution_id_fkey;

-- Rows are no longer updated after their insert: no room to leave on the page.
alter table attempts set (fillfactor = 100);

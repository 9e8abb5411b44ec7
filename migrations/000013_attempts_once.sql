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
-- Stop the workers of the previous version before migrating: they would still insert an
-- attempt row at claim, which the new completion's insert would then collide with.

alter table executions add column attempt_started_at timestamptz;

-- Attempts in progress now: their start moves to the execution, their open row goes.
update executions e
set attempt_started_at = a.started_at
from attempts a
where a.execution_id = e.id and a.attempt_number = e.attempt_count and a.outcome is null
  and e.status = 'RUNNING';
delete from attempts where outcome is null;

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

-- Every attempt row has an outcome now.
alter table attempts alter column outcome set not null;
alter table attempts alter column finished_at set not null;

-- Rows are no longer updated after their insert: no room to leave on the page.
alter table attempts set (fillfactor = 100);

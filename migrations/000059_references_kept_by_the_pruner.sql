-- Five foreign keys whose delete actions the pruner now does itself, in the statements that
-- delete executions and jobs, once per statement instead of once per row.
--
-- Retention is the only thing that deletes executions or jobs (src/db/statements/pruning.ts).
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
-- What the keys also checked on insert is checked where the rows are written: a child's parent is
-- read and turn-locked in createJob (children.ts), prerequisites are read with their executions
-- locked (dependencies.ts), an onComplete job is the one just inserted in the same transaction,
-- and a turn row is written for an execution read in the same statement. None of them can name a
-- row being pruned: a parent must be live to take a child, a prerequisite's locked execution is
-- skipped by the pruner, and the pruner takes only finished rows past their window. The key that
-- makes a late execution of a job being pruned fail (executions -> jobs) stays, as does every key
-- from a row to its workspace. attempts -> executions went the same way in migration 000013.
alter table jobs drop constraint jobs_parent_execution_id_fkey;
alter table execution_children drop constraint execution_children_parent_execution_id_fkey;
alter table job_dependencies drop constraint job_dependencies_job_id_fkey;
alter table job_dependencies drop constraint job_dependencies_prerequisite_id_fkey;
alter table batches drop constraint batches_on_complete_job_id_fkey;

-- Cheaper writes on the claim/complete path, measured with the engine benchmark (see the
-- commit messages for the figures). Nothing here changes what is stored. One database-level
-- check becomes the claim statement's job: that an attempt's workspace is its execution's
-- (see the last section).

-- Attempts are found by (execution_id, attempt_number): the claim writes attempt_number =
-- attempt_count, which no path changes while the lease is held. The (execution_id,
-- lease_epoch) index was a second index insert per execution for lookups the unique
-- constraint's index already serves.
drop index attempts_execution_epoch;

-- The reconciler's "running and lease expired" scan reads the running set through
-- executions_running_endpoint (the running set is bounded by the workers' concurrency). With
-- lease_expires_at in no index, a heartbeat no longer touches any index (a HOT update when
-- the page has room), and a claim inserts into one index fewer.
drop index executions_lease;

-- Foreign keys implied by others: a row's (workspace_id, execution_id) / (workspace_id,
-- job_id) already references a row of the same workspace, whose own workspace_id references
-- workspaces. Each was one more lookup per inserted row.
alter table attempts drop constraint attempts_workspace_id_fkey;
alter table executions drop constraint executions_workspace_id_fkey;
alter table jobs drop constraint jobs_workspace_id_fkey;

-- Executions are updated twice per attempt (claim, completion) and extended by heartbeats:
-- free room on each page keeps the new row version on the same page.
alter table executions set (fillfactor = 70);

-- attempts referenced executions by (workspace_id, id) only so that the reference carried the
-- workspace; that kept a second unique index on executions, maintained on every claim and
-- every completion (both are non-HOT updates: status is in the partial indexes' predicates).
-- attempts are written by the claim statement alone, from the execution row it claims
-- (workspace_id included); the reference by id still guarantees the execution exists.
alter table attempts drop constraint attempts_workspace_id_execution_id_fkey;
alter table attempts add foreign key (execution_id) references executions (id);
alter table executions drop constraint executions_workspace_id_id_key;

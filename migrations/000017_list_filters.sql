-- Indexes for the filters of list screens (jobs and executions), so that each stays a short
-- index scan at a million rows instead of a walk of the workspace's newest-first index.

-- Jobs: search by a prefix of the name (any case) or of the idempotency key.
create index jobs_name_search on jobs (workspace_id, lower(name) text_pattern_ops) where name is not null;
create index jobs_idempotency_search on jobs (workspace_id, idempotency_key text_pattern_ops) where idempotency_key is not null;

-- Executions of one endpoint, newest first.
create index executions_endpoint_created on executions (endpoint_id, created_at desc, id desc);

-- The dead-letter view: FAILED executions, newest first. Partial, so the engine's status
-- changes of every other execution never touch it; FAILED rows are few and stay put.
create index executions_failed_created on executions (workspace_id, created_at desc, id desc) where status = 'FAILED';

-- The overview's aggregate (executionStats, src/db/queries/execution-stats.ts) reads one window
-- of recent activity per workspace; without these it reads every execution of the workspace
-- (a million rows: about a second). Each index is partial, so the hot paths pay little for it.

-- Executions that ended, by when, with what the aggregate groups by (index-only scans):
-- throughput and failures per minute, and what ended in the window per endpoint.
create index executions_workspace_finished on executions (workspace_id, finished_at) include (status, endpoint_id)
  where finished_at is not null;

-- Attempts by when they started, with when they were due: enqueue-to-start latency per minute
-- (attempt_started_at - run_after, the latest attempt of each execution).
create index executions_workspace_attempt_started on executions (workspace_id, attempt_started_at) include (run_after)
  where attempt_started_at is not null;

-- Live work per endpoint ("now"): the claim path's indexes are not per workspace.
create index executions_workspace_live on executions (workspace_id, endpoint_id, status)
  where status in ('PENDING', 'RUNNING');

-- The dead-letter queue's size per endpoint.
create index executions_workspace_failed_endpoint on executions (workspace_id, endpoint_id)
  where status = 'FAILED';

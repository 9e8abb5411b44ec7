-- The overview's aggregate (executionStats, src/db/queries/execution-stats.ts) reads one window
-- of recent activity per workspace; without these it scans every execution and attempt of the
-- workspace (a million rows: seconds). Each index is partial, so it costs the hot paths little.

-- Executions that ended, by when: throughput and failures per minute, and per-endpoint totals.
create index executions_workspace_finished on executions (workspace_id, finished_at)
  where finished_at is not null;

-- First attempts by start time: enqueue-to-start latency per minute (started_at - scheduled_for).
create index attempts_workspace_first_started on attempts (workspace_id, started_at)
  where attempt_number = 1;

-- Live work per endpoint ("now"): the claim path's indexes are not per workspace.
create index executions_workspace_live on executions (workspace_id, endpoint_id, status)
  where status in ('PENDING', 'RUNNING');

-- The dead-letter queue's size per endpoint.
create index executions_workspace_failed_endpoint on executions (workspace_id, endpoint_id)
  where status = 'FAILED';

-- A job's live executions, found among the live ones instead of by walking the job's history.
-- Whether a job has a PENDING or RUNNING execution is asked by the cron scheduler (overlap SKIP,
-- for every due job), by the claim's serial turn (a QUEUE job's occurrences), by runJobNow and by
-- cancelling or retiring jobs. The only index by job was executions_job_created, every execution
-- the job ever had: a cron job keeps one per occurrence (1,440 a day for an every-minute job, all
-- kept until retention), so each question read the job's whole history, and firing 1,000 due jobs
-- with 200 past executions each took 430 ms instead of 8.
--
-- The index of live executions per endpoint (000027) takes job_id into its key, before status:
-- the questions name the job's workspace and endpoint (an execution's are always its job's), and
-- the per-endpoint counts still read it alone. No index is added: an execution enters this one
-- when it is created and when it is claimed, as before.
drop index executions_workspace_live;
create index executions_workspace_live on executions (workspace_id, endpoint_id, job_id, status)
  where status in ('PENDING', 'RUNNING');

-- Declared schedules (gate.schedule / declareSchedules): a cron job the embedding application's
-- code declares by name at start-up. The name is its identity across restarts and replicas: at
-- most one live (not RETIRED) job per workspace bears it, so replicas declaring at once converge.
alter table jobs add column schedule_name text;
create unique index jobs_live_schedule_name on jobs (workspace_id, schedule_name)
  where schedule_name is not null and status <> 'RETIRED';

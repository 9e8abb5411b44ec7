-- Alerts: rules per workspace, the evaluator's cursor and per-(rule, subject) state, one row per
-- notification, the INTERNAL work that evaluates them and sends email, and an ALERT topic in the
-- live events so a subscription sees new notifications.
--
-- Evaluation is INTERNAL work on the engine, as the reaper is: each workspace has a system cron
-- job on the INTERNAL endpoint `jobgate.alerts` (every minute), so it shows in the catalogue and
-- in executions like any other work, is retried by the engine, and needs no timer of its own.
-- Exactly once across workers comes from the cursor row below, taken FOR UPDATE SKIP LOCKED:
-- whichever worker (or manual trigger) gets it evaluates, the others skip (src/service/engine/alert-evaluator.ts).

create table alert_rules (
  id                  uuid primary key default gen_random_uuid(),
  workspace_id        uuid not null references workspaces (id),
  name                text not null check (length(name) between 1 and 200),
  condition           text not null check (condition in
                        ('EXECUTION_FAILED', 'RUN_FAILED', 'INTERVAL_ERROR', 'SCHEDULE_ERROR', 'NO_SUCCESS', 'FINDING')),
  -- Subject selection: all empty means every subject the condition applies to.
  job_ids             uuid[] not null default '{}',
  endpoint_ids        uuid[] not null default '{}',
  handler_names       text[] not null default '{}',
  -- INTERVAL_ERROR: errors in a row before it fires.
  min_consecutive     integer not null default 1 check (min_consecutive between 1 and 1000),
  -- NO_SUCCESS: the dead man's switch.
  no_success_ms       bigint check (no_success_ms >= 1000),
  -- FINDING: the least severity that fires.
  min_severity        text check (min_severity in ('INFO', 'WARNING', 'ERROR', 'DATA_LOSS')),
  webhook_endpoint_id uuid,
  webhook_format      text not null default 'JSON' check (webhook_format in ('JSON', 'SLACK')),
  email               boolean not null default false,
  -- Empty: the installation's default list (JOBGATE_ALERT_EMAIL_TO).
  email_to            text[] not null default '{}',
  -- At most one FIRING notification per subject in this long; the rest are counted.
  rate_limit_ms       bigint not null default 21600000 check (rate_limit_ms >= 1000),
  enabled             boolean not null default true,
  created_by_key_id   uuid references api_keys (id),
  deleted_at          timestamptz,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now(),
  unique (workspace_id, id),
  foreign key (workspace_id, webhook_endpoint_id) references endpoints (workspace_id, id),
  check (condition <> 'NO_SUCCESS' or no_success_ms is not null),
  check (condition <> 'FINDING' or min_severity is not null),
  check (webhook_endpoint_id is not null or email)
);
create unique index alert_rules_live_name on alert_rules (workspace_id, name) where deleted_at is null;
create index alert_rules_workspace_created on alert_rules (workspace_id, created_at desc, id desc);

-- Where each workspace's evaluation has got to in events and findings, and the watermark
-- candidate it is waiting on (positions read while these writers were open: settled once they
-- have all ended; the same rule as src/subscriptions/watermark.ts, kept in the row so that any
-- worker's next pass can settle it).
create table alert_cursors (
  workspace_id      uuid primary key references workspaces (id),
  events_after      bigint not null,
  findings_after    bigint not null,
  pending_events    bigint,
  pending_findings  bigint,
  pending_writers   text[],
  evaluated_at      timestamptz
);

-- What the evaluator knows of one subject of one rule; written in the pass's transaction.
create table alert_states (
  rule_id           uuid not null references alert_rules (id),
  subject_key       text not null,
  workspace_id      uuid not null,
  firing            boolean not null default false,
  -- Whether this firing episode was notified (so its recovery is, once).
  notified          boolean not null default false,
  first_seen_at     timestamptz,
  last_seen_at      timestamptz,
  occurrences       integer not null default 0,
  last_notified_at  timestamptz,
  -- The window start of the last FIRING notification: the key its RESOLVED notification shares.
  window_start      timestamptz,
  suppressed        integer not null default 0,
  -- State checks: the counter last seen (interval error_runs, a schedule error's time).
  observed          text,
  updated_at        timestamptz not null default now(),
  primary key (rule_id, subject_key)
);

create table alert_notifications (
  id               uuid primary key default gen_random_uuid(),
  workspace_id     uuid not null references workspaces (id),
  rule_id          uuid not null,
  condition        text not null,
  kind             text not null check (kind in ('FIRING', 'RESOLVED')),
  subject_type     text not null check (subject_type in ('JOB', 'RECOVERABLE', 'INTERVAL')),
  subject_key      text not null,
  subject_id       uuid,
  subject_name     text,
  window_start     timestamptz not null,
  first_seen_at    timestamptz not null,
  last_seen_at     timestamptz not null,
  occurrences      integer not null,
  suppressed_count integer not null default 0,
  summary          text not null,
  detail           jsonb not null default '{}'::jsonb,
  -- The delivery jobs; their executions are the delivery state.
  webhook_job_id   uuid,
  email_job_id     uuid,
  created_at       timestamptz not null default now(),
  foreign key (workspace_id, rule_id) references alert_rules (workspace_id, id),
  -- A condition notifies once per window, whatever ran the evaluation.
  unique (rule_id, subject_key, kind, window_start)
);
create index alert_notifications_workspace_created on alert_notifications (workspace_id, created_at desc, id desc);

-- Jobs that never alert: set per job, and on the delivery jobs alerts create themselves (a
-- failing webhook must not raise an alert that creates another webhook job).
alter table jobs add column alerts_opt_out boolean not null default false;

-- Interval handlers: errors in a row and the last success, kept by trigger so the engine's
-- statements (src/service/engine/intervals.ts) stay as they are.
alter table interval_handlers add column error_streak integer not null default 0, add column last_ok_at timestamptz;
create function jobgate_interval_streak() returns trigger language plpgsql as $$
begin
  if new.ok_runs > old.ok_runs then
    new.error_streak := 0;
    new.last_ok_at := coalesce(new.last_finished_at, now());
  elsif new.error_runs > old.error_runs then
    new.error_streak := old.error_streak + (new.error_runs - old.error_runs);
  end if;
  return new;
end $$;
create trigger interval_handlers_streak before update on interval_handlers
  for each row execute function jobgate_interval_streak();

-- New notifications are live events (topic ALERT), written in the evaluator's transaction.
alter table events drop constraint events_topic_check;
alter table events add constraint events_topic_check check (topic in ('EXECUTION', 'JOB', 'RUN', 'ALERT'));
create function jobgate_events_alerts_insert() returns trigger language plpgsql as $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, name, status)
  select n.workspace_id, 'ALERT', n.id, case when n.subject_type = 'JOB' then n.subject_id end, n.condition, n.kind
  from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;
create trigger alert_notifications_events_insert after insert on alert_notifications
  referencing new table as new_rows
  for each statement execute function jobgate_events_alerts_insert();

-- Every workspace: the evaluator (a system cron job, as the reaper), the email sender's INTERNAL
-- endpoint (its jobs are created by the evaluator), and the cursor, starting at the current end
-- of events and findings (history from before alerts existed is not alerted on).
create function jobgate_provision_alerts(ws uuid) returns void language plpgsql as $$
declare
  evaluator_id uuid;
begin
  insert into endpoints (workspace_id, name, description, kind, type, handler_name, max_attempts)
  values (ws, 'jobgate.alerts', 'Evaluates alert rules and records notifications (system-owned).', 'HANDLER', 'INTERNAL', 'jobgate.alerts', 3)
  returning id into evaluator_id;
  insert into jobs (workspace_id, endpoint_id, name, kind, input, max_attempts, cron_expression, timezone,
                    misfire_policy, overlap_policy, next_fire_at, alerts_opt_out)
  values (ws, evaluator_id, 'alerts', 'CRON', '{}', 3, '* * * * *', 'UTC', 'FIRE_LATEST', 'SKIP', now(), true);
  -- A mail server that is down is retried with backoff for about a day, never given up quickly.
  insert into endpoints (workspace_id, name, description, kind, type, handler_name, max_attempts, backoff_base_ms, backoff_max_ms)
  values (ws, 'jobgate.alert-email', 'Sends alert notifications by email (system-owned).', 'HANDLER', 'INTERNAL', 'jobgate.alert-email', 30, 5000, 3600000);
  insert into alert_cursors (workspace_id, events_after, findings_after)
  values (ws, (select case when is_called then last_value else 0 end from events_id_seq),
              (select case when is_called then last_value else 0 end from findings_id_seq));
end $$;

create function jobgate_provision_workspace_alerts() returns trigger language plpgsql as $$
begin
  perform jobgate_provision_alerts(new.id);
  return new;
end $$;
create trigger workspaces_provision_alerts after insert on workspaces
  for each row execute function jobgate_provision_workspace_alerts();

select jobgate_provision_alerts(id) from workspaces;

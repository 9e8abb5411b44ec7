-- The schema after migrations/000065_endpoints_say_who_aimed_them.sql: pg_dump --schema-only of a freshly migrated
-- database on PostgreSQL 15, normalised. Written by `npm run schema:dump` (and by
-- `npm run migrations:freeze`); do not edit: change the schema with a new migration.

CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

COMMENT ON EXTENSION pg_trgm IS 'text similarity measurement and index searching based on trigrams';

CREATE FUNCTION public.jobgate_backoff_ms(base_ms integer, max_ms integer, attempt integer, jitter boolean) RETURNS double precision
    LANGUAGE sql
    AS $$
  select case when jitter then random() else 1 end
       * least(max_ms::double precision, base_ms * power(2::double precision, greatest(attempt - 1, 0)))
$$;

CREATE FUNCTION public.jobgate_batch_member_ends() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  -- jobs.batch_id never changes once the job exists; a plain read takes no lock.
  if exists (select 1 from jobs j where j.id = new.job_id and j.batch_id is not null) then
    new.batch_outcome := new.status;
  end if;
  return new;
end $$;

CREATE FUNCTION public.jobgate_catalog_hint() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform pg_notify('jobgate_events', 'c');
  return null;
end $$;

CREATE FUNCTION public.jobgate_complete_batch(b uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
  done batches;
begin
  update batches set completed_at = now(), updated_at = now()
  where id = b and not open and completed_at is null and succeeded + failed + cancelled = total
  returning * into done;
  if done.id is null or done.on_complete_job_id is null then return; end if;
  perform 1 from jobs where id = done.on_complete_job_id for no key update;
  update executions e
  set input = case when jsonb_typeof(e.input) = 'object'
                   then e.input || jsonb_build_object('batch', jsonb_build_object(
                          'id', done.id, 'total', done.total, 'succeeded', done.succeeded, 'failed', done.failed, 'cancelled', done.cancelled))
                   else e.input end,
      updated_at = now()
  where e.job_id = done.on_complete_job_id and e.blocked and e.status = 'PENDING';
  perform jobgate_settle_dependents(array[done.on_complete_job_id]);
end $$;

CREATE FUNCTION public.jobgate_endpoint_capped() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  select w.concurrency_limit is not null and new.type <> 'INTERNAL' into new.workspace_capped
  from workspaces w where w.id = new.workspace_id for share;
  new.workspace_capped := coalesce(new.workspace_capped, false);
  return new;
end $$;

CREATE FUNCTION public.jobgate_endpoint_gate() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if current_setting('transaction_isolation') <> 'read committed' then
    raise exception 'jobgate: an endpoint''s limits can be set or cleared only in a READ COMMITTED transaction (this one is %)',
      upper(current_setting('transaction_isolation'))
      using errcode = '0A000';
  end if;
  -- In id order, as every statement that locks several executions (see lease.ts).
  update executions e set gated = jobgate_endpoint_limited(new)
  from (select x.id from executions x
        where x.endpoint_id = new.id and x.status = 'PENDING' and x.gated <> jobgate_endpoint_limited(new)
        order by x.id for no key update) l
  where e.id = l.id and e.status = 'PENDING';
  return null;
end $$;

CREATE TABLE public.endpoints (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    description text,
    kind text NOT NULL,
    type text DEFAULT 'USER'::text NOT NULL,
    url text,
    method text,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    timeout_ms integer,
    signing_secret text,
    handler_name text,
    payload_spec_id uuid,
    config_id uuid,
    max_attempts integer,
    backoff_base_ms integer DEFAULT 1000 NOT NULL,
    backoff_max_ms integer DEFAULT 300000 NOT NULL,
    jitter boolean DEFAULT true NOT NULL,
    concurrency_limit integer,
    archived_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by_key_id uuid,
    paused_at timestamp with time zone,
    rate_limit_count integer,
    rate_limit_period_ms integer,
    rate_limit_burst integer,
    default_priority smallint DEFAULT 0 NOT NULL,
    key_concurrency_limit integer,
    key_rate_limit_count integer,
    key_rate_limit_period_ms integer,
    key_rate_limit_burst integer,
    workspace_capped boolean DEFAULT false NOT NULL,
    aimed_by_key_id uuid,
    CONSTRAINT endpoints_backoff_base_ms_check CHECK ((backoff_base_ms > 0)),
    CONSTRAINT endpoints_check CHECK ((backoff_max_ms >= backoff_base_ms)),
    CONSTRAINT endpoints_check1 CHECK ((((kind = 'HTTP'::text) AND (url IS NOT NULL) AND (method IS NOT NULL) AND (handler_name IS NULL)) OR ((kind = 'HANDLER'::text) AND (handler_name IS NOT NULL) AND (url IS NULL)))),
    CONSTRAINT endpoints_concurrency_limit_check CHECK ((concurrency_limit > 0)),
    CONSTRAINT endpoints_default_priority_check CHECK (((default_priority >= '-100'::integer) AND (default_priority <= 100))),
    CONSTRAINT endpoints_headers_check CHECK ((jsonb_typeof(headers) = 'object'::text)),
    CONSTRAINT endpoints_key_concurrency_limit_check CHECK (((key_concurrency_limit >= 1) AND (key_concurrency_limit <= 10000))),
    CONSTRAINT endpoints_key_rate_limit_check CHECK ((((key_rate_limit_count IS NULL) AND (key_rate_limit_period_ms IS NULL) AND (key_rate_limit_burst IS NULL)) OR ((key_rate_limit_count > 0) AND (key_rate_limit_period_ms > 0) AND (key_rate_limit_burst > 0)))),
    CONSTRAINT endpoints_kind_check CHECK ((kind = ANY (ARRAY['HTTP'::text, 'HANDLER'::text]))),
    CONSTRAINT endpoints_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT endpoints_method_check CHECK ((method = ANY (ARRAY['GET'::text, 'POST'::text, 'PUT'::text, 'PATCH'::text, 'DELETE'::text]))),
    CONSTRAINT endpoints_name_check CHECK ((name ~ '^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*$'::text)),
    CONSTRAINT endpoints_rate_limit_check CHECK ((((rate_limit_count IS NULL) AND (rate_limit_period_ms IS NULL) AND (rate_limit_burst IS NULL)) OR ((rate_limit_count > 0) AND (rate_limit_period_ms > 0) AND (rate_limit_burst > 0)))),
    CONSTRAINT endpoints_timeout_ms_check CHECK ((timeout_ms > 0)),
    CONSTRAINT endpoints_type_check CHECK ((type = ANY (ARRAY['USER'::text, 'INTERNAL'::text])))
);

COMMENT ON COLUMN public.endpoints.paused_at IS 'When the endpoint was paused: its executions wait and none is claimed until it is resumed (then null). Attempts running when it was paused finish.';

COMMENT ON COLUMN public.endpoints.rate_limit_count IS 'Rate limit: at most this many starts per rate_limit_period_ms (all three null: no limit).';

COMMENT ON COLUMN public.endpoints.rate_limit_period_ms IS 'Rate limit: the period, in milliseconds.';

COMMENT ON COLUMN public.endpoints.rate_limit_burst IS 'Rate limit: the most starts at once after a quiet spell (the bucket''s size).';

COMMENT ON COLUMN public.endpoints.default_priority IS 'The priority of jobs created for this endpoint without one of their own (-100 to 100, higher first).';

COMMENT ON COLUMN public.endpoints.key_concurrency_limit IS 'Most attempts in flight at once per concurrency key, across all workers; null: no per-key limit. Its claims rotate between keys.';

COMMENT ON COLUMN public.endpoints.key_rate_limit_count IS 'Rate limit per concurrency key: at most this many starts per key_rate_limit_period_ms for each key (all three null: no limit).';

COMMENT ON COLUMN public.endpoints.key_rate_limit_period_ms IS 'Rate limit per concurrency key: the period, in milliseconds.';

COMMENT ON COLUMN public.endpoints.key_rate_limit_burst IS 'Rate limit per concurrency key: the most starts of one key at once after a quiet spell.';

COMMENT ON COLUMN public.endpoints.workspace_capped IS 'Its workspace has a concurrency_limit and it is not INTERNAL: its attempts count against that cap. Kept by triggers.';

COMMENT ON COLUMN public.endpoints.aimed_by_key_id IS 'The key that last chose where the endpoint sends (registered it, or changed its url, headers or config); null: a caller without a key. Its config''s secrets are rendered into its requests only when this key wrote them, or is an ADMIN''s.';

CREATE FUNCTION public.jobgate_endpoint_limited(en public.endpoints) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  select en.concurrency_limit is not null or en.rate_limit_count is not null or en.key_concurrency_limit is not null
      or en.key_rate_limit_count is not null or en.workspace_capped
$$;

CREATE FUNCTION public.jobgate_event_writer() RETURNS void
    LANGUAGE sql
    AS $$
  select pg_advisory_xact_lock_shared(27239, 1)
$$;

CREATE FUNCTION public.jobgate_events_alerts_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, name, status)
  select n.workspace_id, 'ALERT', n.id, case when n.subject_type = 'JOB' then n.subject_id end, n.condition, n.kind
  from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_batches_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  moved record;
begin
  for moved in
    select n.id from new_rows n join old_rows o on o.id = n.id
    where n.total is distinct from o.total or n.succeeded is distinct from o.succeeded
       or n.failed is distinct from o.failed or n.cancelled is distinct from o.cancelled
       or n.open is distinct from o.open or n.completed_at is distinct from o.completed_at
    order by n.id
  loop
    perform pg_notify('jobgate_events', 'b:' || moved.id);
  end loop;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_executions_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, attempt_count)
  select n.workspace_id, 'EXECUTION', n.id, n.job_id, n.endpoint_id, n.status, n.attempt_count
  from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_executions_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status, attempt_count)
  select n.workspace_id, 'EXECUTION', n.id, n.job_id, n.endpoint_id, n.status, o.status, n.attempt_count
  from new_rows n join old_rows o on o.id = n.id
  where n.status is distinct from o.status
  order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_findings_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform 1 from new_rows limit 1;
  if found then perform pg_notify('jobgate_events', 'f'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_findings_mark() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_jobs_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status)
  select n.workspace_id, 'JOB', n.id, n.id, n.endpoint_id, n.status from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_jobs_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status)
  select n.workspace_id, 'JOB', n.id, n.id, n.endpoint_id, n.status, o.status
  from new_rows n join old_rows o on o.id = n.id
  where n.status is distinct from o.status
  order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_runs_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, name, status)
  select n.workspace_id, 'RUN', n.id, n.name, n.status from new_rows n order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_events_runs_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  moved record;
begin
  perform jobgate_event_writer();
  insert into events (workspace_id, topic, subject_id, name, status, previous_status, pause_kind)
  select n.workspace_id, 'RUN', n.id, n.name, n.status, o.status, case when n.status = 'PAUSED' then n.pause_kind end
  from new_rows n join old_rows o on o.id = n.id
  where n.status is distinct from o.status
  order by n.id;
  if found then perform pg_notify('jobgate_events', 'e'); end if;
  for moved in
    select n.id from new_rows n join old_rows o on o.id = n.id
    where n.status is distinct from o.status or n.processed is distinct from o.processed
       or n.total is distinct from o.total or n.stats is distinct from o.stats
       or n.cursor is distinct from o.cursor
       or n.retry_attempts is distinct from o.retry_attempts or n.resume_after is distinct from o.resume_after
  loop
    perform pg_notify('jobgate_events', 'r:' || moved.id);
  end loop;
  return null;
end $$;

CREATE FUNCTION public.jobgate_execution_gate() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if tg_op = 'INSERT' and new.status <> 'PENDING' then
    -- Not pending: neither flag applies (what the defaults gave before).
    new.gated := coalesce(new.gated, false);
    new.job_held := coalesce(new.job_held, false);
    return new;
  end if;
  if tg_op = 'UPDATE' or new.gated is null then
    select jobgate_endpoint_limited(en) into new.gated from endpoints en where en.id = new.endpoint_id for share;
    new.gated := coalesce(new.gated, false);
  end if;
  if tg_op = 'UPDATE' or new.job_held is null then
    select not (j.status = 'ACTIVE' or (j.status = 'PAUSED' and new.trigger = 'MANUAL')) into new.job_held
    from jobs j where j.id = new.job_id;
    new.job_held := coalesce(new.job_held, false);
  end if;
  return new;
end $$;

CREATE FUNCTION public.jobgate_executions_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  dependents uuid[];
  b record;
begin
  if not exists (select 1 from new_rows n where n.has_dependents) then return null; end if;

  -- Prerequisites ended: their open edges get the outcome, and the dependents are settled. The
  -- dependents' jobs are locked in id order, after the executions this statement holds.
  select array_agg(l.id order by l.id) into dependents from (
    select j.id from jobs j
    where j.id in (
      select d.job_id from job_dependencies d
      where d.outcome is null and d.prerequisite_id in (
        select n.job_id from new_rows n join old_rows o on o.id = n.id
        where n.has_dependents and n.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') and o.status is distinct from n.status))
    order by j.id for no key update
  ) l;
  if dependents is not null then
    update job_dependencies d set outcome = n.status, resolved_at = now()
    from new_rows n join old_rows o on o.id = n.id
    where n.has_dependents and n.status in ('SUCCEEDED', 'FAILED', 'CANCELLED') and o.status is distinct from n.status
      and d.prerequisite_id = n.job_id and d.outcome is null and d.job_id = any(dependents);
    perform jobgate_settle_dependents(dependents);
  end if;

  -- Members marked just now (the BEFORE trigger), counted per batch, batches in id order.
  for b in
    select j.batch_id as id,
           count(*) filter (where n.batch_outcome = 'SUCCEEDED') as succeeded,
           count(*) filter (where n.batch_outcome = 'FAILED') as failed,
           count(*) filter (where n.batch_outcome = 'CANCELLED') as cancelled
    from new_rows n join old_rows o on o.id = n.id join jobs j on j.id = n.job_id
    where n.has_dependents and n.batch_outcome is not null and o.batch_outcome is null and j.batch_id is not null
    group by j.batch_id
    order by j.batch_id
  loop
    update batches set succeeded = succeeded + b.succeeded, failed = failed + b.failed, cancelled = cancelled + b.cancelled,
                       updated_at = now()
    where id = b.id;
    perform jobgate_complete_batch(b.id);
  end loop;
  return null;
end $$;

CREATE FUNCTION public.jobgate_interval_streak() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  if new.ok_runs > old.ok_runs then
    new.error_streak := 0;
    new.last_ok_at := coalesce(new.last_finished_at, now());
  elsif new.error_runs > old.error_runs then
    new.error_streak := old.error_streak + (new.error_runs - old.error_runs);
  end if;
  return new;
end $$;

CREATE FUNCTION public.jobgate_interval_tick_end() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  due bigint;
begin
  if new.last_finished_at is distinct from old.last_finished_at then
    new.last_epoch := new.epoch;
  end if;
  if old.owner is null and new.owner is not null then
    new.queued_after := false;
  end if;
  -- A tick ends (its owner is cleared) and the statement leaves the next tick where it was (a
  -- hand-back, which makes it due at once, does not).
  if old.owner is not null and new.owner is null and old.every_ms is not null and old.run_started_at is not null then
    if old.overlap = 'SKIP' and not old.queued_after and new.next_due_at = old.next_due_at and old.next_due_at <= now() then
      -- Every cadence tick due while it ran is skipped: the next is the first boundary after now.
      due := floor(extract(epoch from (now() - old.next_due_at)) * 1000 / old.every_ms)::bigint + 1;
      new.next_due_at := old.next_due_at + make_interval(secs => due * old.every_ms / 1000.0);
      new.skipped_ticks := old.skipped_ticks + due;
    else
      -- QUEUE (or a tick queued on purpose): those due while it ran, but for the one run right after it.
      new.skipped_ticks := old.skipped_ticks
        + greatest(0, floor(extract(epoch from (now() - old.run_started_at)) * 1000 / old.every_ms)::bigint - 1);
    end if;
  end if;
  return new;
end $$;

CREATE FUNCTION public.jobgate_job_held() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  -- Its live executions locked first, in id order, as every statement that locks several
  -- (src/db/statements/lease.ts): this waits for one becoming PENDING right now, and the update
  -- below, a statement of its own, then sees it.
  perform 1 from executions x
  where x.workspace_id = new.workspace_id and x.endpoint_id = new.endpoint_id and x.job_id = new.id
    and x.status in ('PENDING', 'RUNNING')
  order by x.id for no key update;
  update executions e set job_held = not (new.status = 'ACTIVE' or (new.status = 'PAUSED' and e.trigger = 'MANUAL'))
  where e.workspace_id = new.workspace_id and e.endpoint_id = new.endpoint_id and e.job_id = new.id
    and e.status = 'PENDING'
    and e.job_held <> not (new.status = 'ACTIVE' or (new.status = 'PAUSED' and e.trigger = 'MANUAL'));
  return null;
end $$;

CREATE FUNCTION public.jobgate_notify_interval_due() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform pg_notify('jobgate_work', 'interval:' || new.name);
  return null;
end $$;

CREATE FUNCTION public.jobgate_notify_work() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  due timestamptz;
  inserted_at timestamptz := clock_timestamp();
begin
  select min(i.run_after) into due from inserted_executions i where i.status = 'PENDING' and not i.blocked;
  if due is null or due = 'infinity' then
    return null;
  elsif due <= inserted_at then
    perform pg_notify('jobgate_work', '');
  else
    -- At most 15 digits (a worker reads more as plain work); a hint past its poll is left to it anyway.
    perform pg_notify('jobgate_work', 'due:' || least(ceil(extract(epoch from due - inserted_at) * 1000), 999999999999999)::bigint);
  end if;
  return null;
end $$;

CREATE FUNCTION public.jobgate_parent_cancelled() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
  asked integer;
begin
  insert into execution_children as c (parent_execution_id, cancelled) values (new.id, true)
  on conflict (parent_execution_id) do update set cancelled = true;
  -- The next statement's snapshot sees every child committed before the upsert above got the row.
  if not exists (select 1 from jobs j where j.parent_execution_id = new.id) then
    return null;
  end if;
  -- The children's jobs first, then their executions, in id order: the order every job mutation
  -- locks in (cancelJob), and every statement that locks several executions (src/db/statements/lease.ts).
  perform 1 from jobs j where j.parent_execution_id = new.id and j.status <> 'RETIRED' order by j.id for no key update;
  update jobs set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
  where parent_execution_id = new.id and status <> 'RETIRED';
  with locked as materialized (
    select e.id from jobs j
    join executions e on e.job_id = j.id
    where j.parent_execution_id = new.id and e.status in ('PENDING', 'RUNNING')
    order by e.id
    for no key update of e
  ), changed as (
    update executions e
    set status = case when e.status = 'PENDING' then 'CANCELLED' else e.status end,
        blocked = false,
        finished_at = case when e.status = 'PENDING' then now() else e.finished_at end,
        last_error = case when e.status = 'PENDING' then 'parent execution ' || new.id || ' was cancelled' else e.last_error end,
        cancel_requested_at = case when e.status = 'RUNNING' then coalesce(e.cancel_requested_at, now()) else e.cancel_requested_at end,
        updated_at = now()
    where e.id = any (array(select l.id from locked l)) and e.status in ('PENDING', 'RUNNING')
    returning e.id, e.status
  )
  -- A running child is asked to abort, as cancelJob asks (heartbeats carry the request too).
  select count(*) into asked from (select pg_notify('jobgate_cancel', c.id::text) from changed c where c.status = 'RUNNING') n;
  return null;
end $$;

CREATE FUNCTION public.jobgate_pin_execution_input() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  select j.input into new.input from jobs j where j.id = new.job_id;
  return new;
end $$;

CREATE FUNCTION public.jobgate_provision_alerts(ws uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.jobgate_provision_reaper(ws uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
declare
  reaper_id uuid;
begin
  insert into endpoints (workspace_id, name, description, kind, type, handler_name, max_attempts)
  values (ws, 'jobgate.reaper', 'Retires cron jobs past their endsAt (system-owned).', 'HANDLER', 'INTERNAL', 'jobgate.reaper', 3)
  returning id into reaper_id;
  insert into jobs (workspace_id, endpoint_id, name, kind, input, max_attempts, cron_expression, timezone,
                    misfire_policy, overlap_policy, next_fire_at)
  values (ws, reaper_id, 'reaper', 'CRON', '{}', 3, '*/5 * * * *', 'UTC', 'FIRE_LATEST', 'SKIP', now());
end $$;

CREATE FUNCTION public.jobgate_provision_retention() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  insert into retention_slices (workspace_id, kind)
  select new.id, k from unnest(array['EXECUTIONS', 'AUDIT', 'RUNS', 'JOBS', 'ALERTS', 'EVENTS']) as k
  on conflict do nothing;
  return new;
end $$;

CREATE FUNCTION public.jobgate_provision_workspace() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_provision_reaper(new.id);
  return new;
end $$;

CREATE FUNCTION public.jobgate_provision_workspace_alerts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  perform jobgate_provision_alerts(new.id);
  return new;
end $$;

CREATE FUNCTION public.jobgate_settle_dependents(dependents uuid[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
begin
  with failed as (
    select j.id,
           (select 'prerequisite job ' || d.prerequisite_id || ' ended ' || d.outcome
            from job_dependencies d
            where d.job_id = j.id and d.outcome in ('FAILED', 'CANCELLED')
            order by d.resolved_at, d.prerequisite_id limit 1) as why
    from jobs j
    where j.id = any(dependents) and j.status <> 'RETIRED' and j.on_prerequisite_failure = 'CANCEL'
      and exists (select 1 from job_dependencies d where d.job_id = j.id and d.outcome in ('FAILED', 'CANCELLED'))
  ), retired as (
    -- Run whether or not it is read, as every data-modifying WITH.
    update jobs j set status = 'RETIRED', retired_at = now(), next_fire_at = null, updated_at = now()
    from failed f where j.id = f.id
    returning j.id
  ), locked as materialized (
    -- In id order, as every statement that locks several executions (src/db/statements/lease.ts).
    select e.id from executions e where e.job_id in (select id from failed) and e.blocked and e.status = 'PENDING'
    order by e.id for no key update
  )
  update executions e
  set status = 'CANCELLED', blocked = false, finished_at = now(), updated_at = now(),
      last_error = (select f.why from failed f where f.id = e.job_id)
  from locked l
  where e.id = l.id;

  with released as (
    select e.id from executions e
    where e.job_id = any(dependents) and e.blocked and e.status = 'PENDING'
      and not exists (select 1 from job_dependencies d where d.job_id = e.job_id and d.outcome is null)
      and not exists (select 1 from batches b where b.on_complete_job_id = e.job_id and b.completed_at is null)
    order by e.id for no key update
  )
  update executions e set blocked = false, updated_at = now()
  from released r where e.id = r.id;
  -- Released work may be due now: wake the workers, inside this transaction.
  if found then perform pg_notify('jobgate_work', ''); end if;
end $$;

CREATE FUNCTION public.jobgate_uuid_v7() RETURNS uuid
    LANGUAGE sql PARALLEL SAFE
    AS $$
  -- A version 4 id with its first 48 bits replaced by the millisecond, and its version nibble
  -- turned from 0100 to 0111 (bits 52 and 53 of the bytes, counted from the first byte's lowest).
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
              placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
              from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;

CREATE FUNCTION public.jobgate_withdraw_ahead() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  -- The writer mark before the event takes an id (src/subscriptions/hub/watermark.ts).
  perform jobgate_event_writer();
  with withdrawn as (
    delete from executions e
    where e.workspace_id = old.workspace_id and e.endpoint_id = old.endpoint_id and e.job_id = old.id
      and e.scheduled_for = old.ahead_at and e.trigger = 'SCHEDULE' and e.status = 'PENDING' and e.attempt_count = 0
    returning e.id, e.workspace_id, e.job_id, e.endpoint_id, e.attempt_count
  ), unparented as (
    update jobs j set parent_execution_id = null where j.parent_execution_id in (select id from withdrawn)
  ), gone_turns as (
    delete from execution_children c where c.parent_execution_id in (select id from withdrawn)
  )
  insert into events (workspace_id, topic, subject_id, job_id, endpoint_id, status, previous_status, attempt_count)
  select w.workspace_id, 'EXECUTION', w.id, w.job_id, w.endpoint_id, 'CANCELLED', 'PENDING', w.attempt_count
  from withdrawn w;
  if not found then return new; end if;
  perform pg_notify('jobgate_events', 'e');
  if new.status = 'ACTIVE'
     and (new.cron_expression, new.timezone, new.starts_at) is not distinct from (old.cron_expression, old.timezone, old.starts_at) then
    new.next_fire_at := case when new.ends_at is null or old.ahead_at < new.ends_at then old.ahead_at end;
  end if;
  new.ahead_at := null;
  return new;
end $$;

CREATE FUNCTION public.jobgate_workspace_cap() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
  update endpoints en set workspace_capped = (new.concurrency_limit is not null and en.type <> 'INTERNAL')
  from (select x.id from endpoints x
        where x.workspace_id = new.id and x.workspace_capped <> (new.concurrency_limit is not null and x.type <> 'INTERNAL')
        order by x.id for no key update) l
  where en.id = l.id;
  return null;
end $$;

CREATE TABLE public.alert_cursors (
    workspace_id uuid NOT NULL,
    events_after bigint NOT NULL,
    findings_after bigint NOT NULL,
    pending_events bigint,
    pending_findings bigint,
    pending_writers text[],
    evaluated_at timestamp with time zone
);

CREATE TABLE public.alert_notifications (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    rule_id uuid NOT NULL,
    condition text NOT NULL,
    kind text NOT NULL,
    subject_type text NOT NULL,
    subject_key text NOT NULL,
    subject_id uuid,
    subject_name text,
    window_start timestamp with time zone NOT NULL,
    first_seen_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    occurrences integer NOT NULL,
    suppressed_count integer DEFAULT 0 NOT NULL,
    summary text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    webhook_job_id uuid,
    email_job_id uuid,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    silence_id uuid,
    CONSTRAINT alert_notifications_kind_check CHECK ((kind = ANY (ARRAY['FIRING'::text, 'RESOLVED'::text]))),
    CONSTRAINT alert_notifications_subject_type_check CHECK ((subject_type = ANY (ARRAY['JOB'::text, 'RECOVERABLE'::text, 'INTERVAL'::text])))
);

CREATE TABLE public.alert_rules (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    condition text NOT NULL,
    job_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    endpoint_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    handler_names text[] DEFAULT '{}'::text[] NOT NULL,
    min_consecutive integer DEFAULT 1 NOT NULL,
    no_success_ms bigint,
    min_severity text,
    webhook_endpoint_id uuid,
    webhook_format text DEFAULT 'JSON'::text NOT NULL,
    email boolean DEFAULT false NOT NULL,
    email_to text[] DEFAULT '{}'::text[] NOT NULL,
    rate_limit_ms bigint DEFAULT 21600000 NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_by_key_id uuid,
    deleted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT alert_rules_check CHECK (((condition <> 'NO_SUCCESS'::text) OR (no_success_ms IS NOT NULL))),
    CONSTRAINT alert_rules_check1 CHECK (((condition <> 'FINDING'::text) OR (min_severity IS NOT NULL))),
    CONSTRAINT alert_rules_check2 CHECK (((webhook_endpoint_id IS NOT NULL) OR email)),
    CONSTRAINT alert_rules_condition_check CHECK ((condition = ANY (ARRAY['EXECUTION_FAILED'::text, 'RUN_FAILED'::text, 'INTERVAL_ERROR'::text, 'SCHEDULE_ERROR'::text, 'NO_SUCCESS'::text, 'FINDING'::text]))),
    CONSTRAINT alert_rules_min_consecutive_check CHECK (((min_consecutive >= 1) AND (min_consecutive <= 1000))),
    CONSTRAINT alert_rules_min_severity_check CHECK ((min_severity = ANY (ARRAY['INFO'::text, 'WARNING'::text, 'ERROR'::text, 'DATA_LOSS'::text]))),
    CONSTRAINT alert_rules_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT alert_rules_no_success_ms_check CHECK ((no_success_ms >= 1000)),
    CONSTRAINT alert_rules_rate_limit_ms_check CHECK ((rate_limit_ms >= 1000)),
    CONSTRAINT alert_rules_webhook_format_check CHECK ((webhook_format = ANY (ARRAY['JSON'::text, 'SLACK'::text])))
);

CREATE TABLE public.alert_silences (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    rule_id uuid NOT NULL,
    subject_key text,
    subject_type text,
    subject_id uuid,
    subject_name text,
    starts_at timestamp with time zone DEFAULT now() NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    ended_by_key_id uuid,
    comment text,
    created_by_key_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT alert_silences_check CHECK ((ends_at > starts_at)),
    CONSTRAINT alert_silences_check1 CHECK (((subject_key IS NULL) = (subject_type IS NULL))),
    CONSTRAINT alert_silences_comment_check CHECK ((length(comment) <= 500)),
    CONSTRAINT alert_silences_subject_type_check CHECK ((subject_type = ANY (ARRAY['JOB'::text, 'RECOVERABLE'::text, 'INTERVAL'::text])))
);

CREATE TABLE public.alert_states (
    rule_id uuid NOT NULL,
    subject_key text NOT NULL,
    workspace_id uuid NOT NULL,
    firing boolean DEFAULT false NOT NULL,
    notified boolean DEFAULT false NOT NULL,
    first_seen_at timestamp with time zone,
    last_seen_at timestamp with time zone,
    occurrences integer DEFAULT 0 NOT NULL,
    last_notified_at timestamp with time zone,
    window_start timestamp with time zone,
    suppressed integer DEFAULT 0 NOT NULL,
    observed text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    acknowledged_at timestamp with time zone,
    acknowledged_by_key_id uuid,
    CONSTRAINT alert_states_acknowledged_by CHECK (((acknowledged_by_key_id IS NULL) OR (acknowledged_at IS NOT NULL)))
);

CREATE TABLE public.api_keys (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    role text NOT NULL,
    installation_admin boolean DEFAULT false NOT NULL,
    prefix text NOT NULL,
    key_hash bytea NOT NULL,
    created_by_key_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone,
    CONSTRAINT api_keys_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT api_keys_role_check CHECK ((role = ANY (ARRAY['ADMIN'::text, 'OPERATOR'::text, 'VIEWER'::text])))
);

CREATE TABLE public.attempts (
    workspace_id uuid NOT NULL,
    execution_id uuid NOT NULL,
    attempt_number integer NOT NULL,
    lease_epoch bigint NOT NULL,
    worker_id text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    outcome text,
    status_code integer,
    duration_ms integer,
    error text,
    response_excerpt text,
    target jsonb,
    worker_host text,
    worker_pid integer,
    error_stack text,
    CONSTRAINT attempts_attempt_number_check CHECK ((attempt_number >= 1)),
    CONSTRAINT attempts_outcome_check CHECK ((outcome = ANY (ARRAY['SUCCEEDED'::text, 'FAILED'::text, 'TIMED_OUT'::text, 'LEASE_EXPIRED'::text, 'CANCELLED'::text])))
)
WITH (fillfactor='100');

COMMENT ON COLUMN public.attempts.worker_host IS 'Host name of the worker that made the attempt; null when not recorded.';

COMMENT ON COLUMN public.attempts.worker_pid IS 'Process id of the worker that made the attempt, on worker_host; null when not recorded.';

COMMENT ON COLUMN public.attempts.error_stack IS 'HANDLER endpoints: the stack of the error the handler threw, redacted and capped; null otherwise.';

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    workspace_id uuid NOT NULL,
    actor_kind text NOT NULL,
    actor_key_id uuid,
    action text NOT NULL,
    target_type text,
    target_id text,
    input jsonb DEFAULT '{}'::jsonb NOT NULL,
    result_code text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT audit_log_actor_kind_check CHECK ((actor_kind = ANY (ARRAY['user'::text, 'library'::text, 'system'::text])))
);

ALTER TABLE public.audit_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.batches (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    key text,
    name text,
    open boolean NOT NULL,
    total integer DEFAULT 0 NOT NULL,
    succeeded integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    cancelled integer DEFAULT 0 NOT NULL,
    on_complete_job_id uuid,
    completed_at timestamp with time zone,
    created_by_key_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT batches_completed CHECK (((completed_at IS NULL) OR ((NOT open) AND (((succeeded + failed) + cancelled) = total)))),
    CONSTRAINT batches_counted CHECK ((((succeeded + failed) + cancelled) <= total)),
    CONSTRAINT batches_key_check CHECK (((key <> ''::text) AND (length(key) <= 200))),
    CONSTRAINT batches_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200)))
);

COMMENT ON TABLE public.batches IS 'Jobs created together (fan-out) and the onComplete job that runs once all of them ended (fan-in).';

CREATE TABLE public.configs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    entries jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by_key_id uuid,
    CONSTRAINT configs_entries_check CHECK ((jsonb_typeof(entries) = 'object'::text))
);

CREATE TABLE public.endpoint_key_rate_buckets (
    endpoint_id uuid NOT NULL,
    concurrency_key text NOT NULL COLLATE pg_catalog."C",
    tokens double precision NOT NULL,
    refilled_at timestamp with time zone NOT NULL
);

COMMENT ON TABLE public.endpoint_key_rate_buckets IS 'The token bucket of each concurrency key of a key-rate-limited endpoint that has started work: its tokens as of refilled_at (database clock). No row: a full bucket (the pruner deletes full ones).';

CREATE TABLE public.endpoint_key_turns (
    endpoint_id uuid NOT NULL,
    last_key text NOT NULL COLLATE pg_catalog."C"
);

COMMENT ON TABLE public.endpoint_key_turns IS 'Where each keyed endpoint''s rotation between concurrency keys stands: the next claim starts after last_key.';

CREATE TABLE public.endpoint_rate_buckets (
    endpoint_id uuid NOT NULL,
    tokens double precision NOT NULL,
    refilled_at timestamp with time zone NOT NULL
);

COMMENT ON TABLE public.endpoint_rate_buckets IS 'The token bucket of each rate-limited endpoint that has started work: its tokens as of refilled_at (database clock). No row: a full bucket.';

CREATE TABLE public.endpoint_retry_after (
    endpoint_id uuid NOT NULL,
    until timestamp with time zone NOT NULL,
    status_code integer NOT NULL,
    noted_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT endpoint_retry_after_status_code_check CHECK ((status_code = ANY (ARRAY[429, 503])))
);

COMMENT ON TABLE public.endpoint_retry_after IS 'Until when each endpoint''s target asked for no more requests (HTTP 429 or 503 with Retry-After): none of its executions starts before then. Past rows are inert.';

CREATE TABLE public.event_generations (
    gen integer NOT NULL,
    attached_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    ended_at timestamp with time zone,
    counted jsonb DEFAULT '{}'::jsonb NOT NULL,
    counted_through bigint,
    retired_at timestamp with time zone
);

COMMENT ON TABLE public.event_generations IS 'The generations of live events (migration 000062): when each partition was attached, when writers began and stopped writing it, and how far its removal has got. Its partition is events_g<gen>.';

CREATE SEQUENCE public.events_generation
    START WITH 0
    INCREMENT BY 1
    MINVALUE 0
    NO MAXVALUE
    CACHE 1;

CREATE TABLE public.events (
    id bigint NOT NULL,
    workspace_id uuid NOT NULL,
    topic text NOT NULL,
    subject_id uuid NOT NULL,
    job_id uuid,
    endpoint_id uuid,
    name text,
    status text NOT NULL,
    previous_status text,
    attempt_count integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    pause_kind text,
    gen integer DEFAULT pg_sequence_last_value('public.events_generation'::regclass) NOT NULL,
    CONSTRAINT events_topic_check CHECK ((topic = ANY (ARRAY['EXECUTION'::text, 'JOB'::text, 'RUN'::text, 'ALERT'::text])))
)
PARTITION BY LIST (gen);

COMMENT ON TABLE public.events IS 'Live events, the subscriptions'' replay log: partitioned by generation (migration 000062; event_generations), each pruned whole once past every window, and row by row for a workspace whose window is shorter.';

CREATE TABLE public.events_g0 (
    id bigint NOT NULL,
    workspace_id uuid NOT NULL,
    topic text NOT NULL,
    subject_id uuid NOT NULL,
    job_id uuid,
    endpoint_id uuid,
    name text,
    status text NOT NULL,
    previous_status text,
    attempt_count integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    pause_kind text,
    gen integer DEFAULT NULL NOT NULL,
    CONSTRAINT events_topic_check CHECK ((topic = ANY (ARRAY['EXECUTION'::text, 'JOB'::text, 'RUN'::text, 'ALERT'::text])))
);

CREATE TABLE public.events_g1 (
    id bigint NOT NULL,
    workspace_id uuid NOT NULL,
    topic text NOT NULL,
    subject_id uuid NOT NULL,
    job_id uuid,
    endpoint_id uuid,
    name text,
    status text NOT NULL,
    previous_status text,
    attempt_count integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    pause_kind text,
    gen integer DEFAULT pg_sequence_last_value('public.events_generation'::regclass) NOT NULL,
    CONSTRAINT events_topic_check CHECK ((topic = ANY (ARRAY['EXECUTION'::text, 'JOB'::text, 'RUN'::text, 'ALERT'::text])))
);

ALTER TABLE public.events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.execution_children (
    parent_execution_id uuid NOT NULL,
    cancelled boolean DEFAULT false NOT NULL
);

COMMENT ON TABLE public.execution_children IS 'Where a parent execution''s children and its cancellation take turns (migration 000050).';

CREATE TABLE public.executions (
    id uuid DEFAULT public.jobgate_uuid_v7() NOT NULL,
    workspace_id uuid NOT NULL,
    job_id uuid NOT NULL,
    scheduled_for timestamp with time zone NOT NULL,
    status text DEFAULT 'PENDING'::text NOT NULL,
    attempt_count integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    run_after timestamp with time zone NOT NULL,
    lease_owner text,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    lease_expires_at timestamp with time zone,
    last_error text,
    finished_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    endpoint_id uuid NOT NULL,
    lock_key text,
    cancel_requested_at timestamp with time zone,
    request_id text,
    trigger text DEFAULT 'SCHEDULE'::text NOT NULL,
    serial boolean DEFAULT false NOT NULL,
    created_by_key_id uuid,
    attempt_started_at timestamp with time zone,
    input jsonb,
    claim_token uuid,
    priority smallint DEFAULT 0 NOT NULL,
    concurrency_key text DEFAULT ''::text NOT NULL COLLATE pg_catalog."C",
    gated boolean NOT NULL,
    blocked boolean DEFAULT false NOT NULL,
    has_dependents boolean DEFAULT false NOT NULL,
    batch_outcome text,
    job_held boolean NOT NULL,
    CONSTRAINT executions_attempt_count_check CHECK ((attempt_count >= 0)),
    CONSTRAINT executions_batch_outcome_check CHECK ((batch_outcome = ANY (ARRAY['SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text]))),
    CONSTRAINT executions_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT executions_priority_check CHECK (((priority >= '-100'::integer) AND (priority <= 100))),
    CONSTRAINT executions_request_id_check CHECK ((request_id <> ''::text)),
    CONSTRAINT executions_status_check CHECK ((status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text, 'SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text]))),
    CONSTRAINT executions_trigger_check CHECK ((trigger = ANY (ARRAY['SCHEDULE'::text, 'MANUAL'::text])))
)
WITH (fillfactor='70');

COMMENT ON COLUMN public.executions.input IS 'The input delivered, pinned when the execution was created; null only for executions that had finished before migration 000018 (their input at the time is not known).';

COMMENT ON COLUMN public.executions.claim_token IS 'The token of the claim that last took the execution, made up by its worker: how the worker finds what a claim took whose answer it never received. Null for executions never claimed since migration 000031.';

COMMENT ON COLUMN public.executions.priority IS 'The job''s priority when this execution was created: claims take higher first.';

COMMENT ON COLUMN public.executions.concurrency_key IS 'Its job''s concurrency key when it was created (pinned); '''' for none.';

COMMENT ON COLUMN public.executions.gated IS 'PENDING under an endpoint with a concurrency, rate or per-key limit: claimed only under that endpoint''s advisory lock. Kept by triggers.';

COMMENT ON COLUMN public.executions.blocked IS 'PENDING and waiting for its job''s prerequisites (job_dependencies): never claimed, out of the claim''s indexes. Cleared when they are settled.';

COMMENT ON COLUMN public.executions.has_dependents IS 'A job depends on this execution''s outcome: its end settles them (executions_prerequisite_ended). False for nearly all, so the trigger costs other executions nothing.';

COMMENT ON COLUMN public.executions.batch_outcome IS 'A batch member''s scheduled execution: how it first ended, counted into its batch once (a re-drive does not count again); null before, and for every other execution.';

COMMENT ON COLUMN public.executions.job_held IS 'PENDING and its job does not let it run (paused, and not triggered by hand; or retired): never claimed. Kept by triggers from the job''s status.';

CREATE TABLE public.findings (
    id bigint NOT NULL,
    workspace_id uuid NOT NULL,
    run_id uuid NOT NULL,
    kind text NOT NULL,
    severity text NOT NULL,
    resource_id text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT findings_kind_check CHECK (((length(kind) >= 1) AND (length(kind) <= 200))),
    CONSTRAINT findings_resource_id_check CHECK (((length(resource_id) >= 1) AND (length(resource_id) <= 500))),
    CONSTRAINT findings_severity_check CHECK ((severity = ANY (ARRAY['INFO'::text, 'WARNING'::text, 'ERROR'::text, 'DATA_LOSS'::text])))
);

ALTER TABLE public.findings ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.findings_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.interval_abandoned (
    name text NOT NULL,
    worker_id text NOT NULL,
    epoch bigint NOT NULL,
    abandoned_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.interval_handlers (
    name text NOT NULL,
    every_ms bigint,
    next_due_at timestamp with time zone NOT NULL,
    owner text,
    epoch bigint DEFAULT 0 NOT NULL,
    run_started_at timestamp with time zone,
    last_status text,
    last_count bigint,
    last_cause text,
    last_error text,
    last_started_at timestamp with time zone,
    last_finished_at timestamp with time zone,
    ok_runs bigint DEFAULT 0 NOT NULL,
    error_runs bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    overrun boolean DEFAULT false NOT NULL,
    error_streak integer DEFAULT 0 NOT NULL,
    last_ok_at timestamp with time zone,
    skipped_ticks bigint DEFAULT 0 NOT NULL,
    last_epoch bigint,
    abandoned_total bigint DEFAULT 0 NOT NULL,
    overlap text DEFAULT 'SKIP'::text NOT NULL,
    queued_after boolean DEFAULT false NOT NULL,
    last_extra jsonb,
    force_next boolean DEFAULT false NOT NULL,
    CONSTRAINT interval_handlers_check CHECK (((owner IS NULL) = (run_started_at IS NULL))),
    CONSTRAINT interval_handlers_check1 CHECK (((last_status = 'ERROR'::text) = (last_cause IS NOT NULL))),
    CONSTRAINT interval_handlers_every_ms_check CHECK ((every_ms > 0)),
    CONSTRAINT interval_handlers_last_cause_check CHECK ((last_cause = ANY (ARRAY['HANDLER'::text, 'TIMEOUT'::text, 'CRASHED'::text]))),
    CONSTRAINT interval_handlers_last_status_check CHECK ((last_status = ANY (ARRAY['OK'::text, 'ERROR'::text]))),
    CONSTRAINT interval_handlers_name_check CHECK ((name ~ '^[A-Za-z0-9_.:-]{1,200}$'::text)),
    CONSTRAINT interval_handlers_overlap_check CHECK ((overlap = ANY (ARRAY['SKIP'::text, 'QUEUE'::text]))),
    CONSTRAINT interval_handlers_overrun_owned CHECK (((NOT overrun) OR (owner IS NOT NULL)))
);

COMMENT ON COLUMN public.interval_handlers.every_ms IS 'Period between ticks, in ms; null for an on-demand handler, which runs only when triggered.';

COMMENT ON COLUMN public.interval_handlers.skipped_ticks IS 'Ticks skipped because a tick was still running when they came due (all time).';

COMMENT ON COLUMN public.interval_handlers.last_epoch IS 'The epoch (take) of the tick whose outcome last_status, last_cause, last_error ... hold; null before the first outcome.';

COMMENT ON COLUMN public.interval_handlers.abandoned_total IS 'Ticks abandoned after their timeout and grace, their handler still running (all time).';

COMMENT ON COLUMN public.interval_handlers.overlap IS 'Cadence ticks due while a tick runs: SKIP (skipped; the next is the first period boundary after it ends) or QUEUE (one tick right after it).';

COMMENT ON COLUMN public.interval_handlers.queued_after IS 'A forced trigger queued one tick right after the running one (runs under either overlap policy); cleared by the take.';

COMMENT ON COLUMN public.interval_handlers.last_extra IS 'The JSON the last tick returned beside its count (OK only; null when it returned none).';

COMMENT ON COLUMN public.interval_handlers.force_next IS 'A trigger with force made the next tick due: that tick runs with force (its handler skips its own grace window); cleared by the take.';

CREATE TABLE public.job_dependencies (
    job_id uuid NOT NULL,
    prerequisite_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    outcome text,
    resolved_at timestamp with time zone,
    "position" smallint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT job_dependencies_not_itself CHECK ((job_id <> prerequisite_id)),
    CONSTRAINT job_dependencies_outcome_check CHECK ((outcome = ANY (ARRAY['SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text]))),
    CONSTRAINT job_dependencies_resolved CHECK (((outcome IS NULL) = (resolved_at IS NULL)))
);

COMMENT ON TABLE public.job_dependencies IS 'Job `job_id` starts only once job `prerequisite_id` has an outcome (and under CANCEL, a SUCCEEDED one).';

CREATE TABLE public.jobgate_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.jobs (
    id uuid DEFAULT public.jobgate_uuid_v7() NOT NULL,
    workspace_id uuid NOT NULL,
    endpoint_id uuid NOT NULL,
    name text,
    kind text NOT NULL,
    status text DEFAULT 'ACTIVE'::text NOT NULL,
    input jsonb DEFAULT '{}'::jsonb NOT NULL,
    max_attempts integer NOT NULL,
    idempotency_key text,
    run_at timestamp with time zone,
    cron_expression text,
    timezone text,
    starts_at timestamp with time zone,
    ends_at timestamp with time zone,
    misfire_policy text,
    overlap_policy text,
    next_fire_at timestamp with time zone,
    retired_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    lock_key text,
    last_fired_at timestamp with time zone,
    skipped_ticks integer DEFAULT 0 NOT NULL,
    last_skip_at timestamp with time zone,
    last_skip_reason text,
    missed_ticks integer DEFAULT 0 NOT NULL,
    schedule_error text,
    schedule_error_at timestamp with time zone,
    created_by_key_id uuid,
    schedule_name text,
    alerts_opt_out boolean DEFAULT false NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    concurrency_key text COLLATE pg_catalog."C",
    on_prerequisite_failure text,
    batch_id uuid,
    batch_outcome text,
    parent_execution_id uuid,
    ahead_at timestamp with time zone,
    CONSTRAINT jobs_batch_outcome_check CHECK ((batch_outcome = ANY (ARRAY['SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text]))),
    CONSTRAINT jobs_check CHECK (((kind = 'DELAYED'::text) = (run_at IS NOT NULL))),
    CONSTRAINT jobs_check1 CHECK (((kind = 'CRON'::text) = ((cron_expression IS NOT NULL) AND (timezone IS NOT NULL) AND (misfire_policy IS NOT NULL) AND (overlap_policy IS NOT NULL)))),
    CONSTRAINT jobs_check2 CHECK (((kind = 'CRON'::text) OR (next_fire_at IS NULL))),
    CONSTRAINT jobs_check3 CHECK (((starts_at IS NULL) OR (ends_at IS NULL) OR (starts_at < ends_at))),
    CONSTRAINT jobs_check4 CHECK (((status = 'RETIRED'::text) = (retired_at IS NOT NULL))),
    CONSTRAINT jobs_concurrency_key_check CHECK (((length(concurrency_key) >= 1) AND (length(concurrency_key) <= 200))),
    CONSTRAINT jobs_idempotency_key_check CHECK ((idempotency_key <> ''::text)),
    CONSTRAINT jobs_kind_check CHECK ((kind = ANY (ARRAY['IMMEDIATE'::text, 'DELAYED'::text, 'CRON'::text]))),
    CONSTRAINT jobs_lock_key_check CHECK ((lock_key <> ''::text)),
    CONSTRAINT jobs_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT jobs_misfire_policy_check CHECK ((misfire_policy = ANY (ARRAY['FIRE_LATEST'::text, 'SKIP'::text, 'FIRE_ALL'::text]))),
    CONSTRAINT jobs_on_prerequisite_failure_check CHECK ((on_prerequisite_failure = ANY (ARRAY['CANCEL'::text, 'RUN'::text]))),
    CONSTRAINT jobs_overlap_policy_check CHECK ((overlap_policy = ANY (ARRAY['SKIP'::text, 'QUEUE'::text, 'ALLOW'::text]))),
    CONSTRAINT jobs_priority_check CHECK (((priority >= '-100'::integer) AND (priority <= 100))),
    CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['ACTIVE'::text, 'PAUSED'::text, 'RETIRED'::text])))
);

COMMENT ON COLUMN public.jobs.priority IS 'Higher first (-100 to 100); pinned on each execution when it is created.';

COMMENT ON COLUMN public.jobs.concurrency_key IS 'The key its executions count against for their endpoint''s key_concurrency_limit (e.g. a customer''s id); null: none.';

COMMENT ON COLUMN public.jobs.on_prerequisite_failure IS 'What happens to this job when a prerequisite FAILED or was CANCELLED: CANCEL retires it, RUN starts it anyway; null: it has no prerequisites.';

COMMENT ON COLUMN public.jobs.batch_id IS 'The batch this job is a member of; null: none.';

COMMENT ON COLUMN public.jobs.batch_outcome IS 'No longer used (000051: executions.batch_outcome); dropped by a later migration.';

COMMENT ON COLUMN public.jobs.parent_execution_id IS 'The execution this job is a child of (its handler made it); null: none.';

COMMENT ON COLUMN public.jobs.ahead_at IS 'The occurrence the scheduler wrote before its time (a PENDING execution whose run_after is this); next_fire_at is then the one after it. Kept once passed, until the next write: lastFiredAt reads it.';

CREATE TABLE public.payload_specs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    description text,
    json_schema jsonb NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by_key_id uuid
);

CREATE TABLE public.retention_slices (
    workspace_id uuid NOT NULL,
    kind text NOT NULL,
    next_due_at timestamp with time zone DEFAULT now() NOT NULL,
    owner text,
    epoch bigint DEFAULT 0 NOT NULL,
    lease_until timestamp with time zone,
    last_started_at timestamp with time zone,
    last_finished_at timestamp with time zone,
    last_pruned bigint DEFAULT 0 NOT NULL,
    pruned_total bigint DEFAULT 0 NOT NULL,
    resume_created_at timestamp with time zone,
    resume_id uuid,
    CONSTRAINT retention_slices_check CHECK (((owner IS NULL) = (lease_until IS NULL))),
    CONSTRAINT retention_slices_kind_check CHECK ((kind = ANY (ARRAY['EXECUTIONS'::text, 'AUDIT'::text, 'RUNS'::text, 'JOBS'::text, 'ALERTS'::text, 'EVENTS'::text])))
);

CREATE TABLE public.run_schedules (
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    cron_expression text,
    timezone text,
    every_ms bigint,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    next_due_at timestamp with time zone NOT NULL,
    ticks bigint DEFAULT 0 NOT NULL,
    ticks_on_active bigint DEFAULT 0 NOT NULL,
    last_tick_at timestamp with time zone,
    last_tick_outcome text,
    last_tick_run_id uuid,
    last_error text,
    last_error_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT run_schedules_check CHECK ((((cron_expression IS NOT NULL) AND (timezone IS NOT NULL) AND (every_ms IS NULL)) OR ((cron_expression IS NULL) AND (timezone IS NULL) AND (every_ms IS NOT NULL)))),
    CONSTRAINT run_schedules_every_ms_check CHECK ((every_ms > 0)),
    CONSTRAINT run_schedules_last_tick_outcome_check CHECK ((last_tick_outcome = ANY (ARRAY['STARTED'::text, 'RESUMED'::text, 'ACTIVE'::text, 'HELD'::text]))),
    CONSTRAINT run_schedules_name_check CHECK ((name ~ '^[A-Za-z0-9_.:-]{1,200}$'::text))
);

CREATE TABLE public.runs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    status text DEFAULT 'RUNNING'::text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    cursor bytea,
    cursor_json boolean DEFAULT false NOT NULL,
    stats jsonb DEFAULT '{}'::jsonb NOT NULL,
    processed bigint DEFAULT 0 NOT NULL,
    total bigint,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    owner text,
    epoch bigint DEFAULT 0 NOT NULL,
    heartbeat_at timestamp with time zone,
    error text,
    pause_reason text,
    finished_at timestamp with time zone,
    created_by_key_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    stale_ms integer,
    pause_kind text,
    resume_after timestamp with time zone,
    outage_hand_backs integer DEFAULT 0 NOT NULL,
    retry_attempts integer DEFAULT 0 NOT NULL,
    retry_budget integer,
    CONSTRAINT runs_name_check CHECK ((name ~ '^[A-Za-z0-9_.:-]{1,200}$'::text)),
    CONSTRAINT runs_pause_kind_check CHECK ((pause_kind = ANY (ARRAY['CANCELLED'::text, 'CRASHED'::text, 'HANDLER'::text]))),
    CONSTRAINT runs_pause_kind_when_paused CHECK (((status = 'PAUSED'::text) = (pause_kind IS NOT NULL))),
    CONSTRAINT runs_processed_check CHECK ((processed >= 0)),
    CONSTRAINT runs_retry_attempts_check CHECK ((retry_attempts >= 0)),
    CONSTRAINT runs_retry_budget_check CHECK ((retry_budget >= 0)),
    CONSTRAINT runs_stale_ms_check CHECK ((stale_ms > 0)),
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['RUNNING'::text, 'CANCEL_REQUESTED'::text, 'PAUSED'::text, 'COMPLETED'::text, 'FAILED'::text]))),
    CONSTRAINT runs_total_check CHECK ((total >= 0))
);

COMMENT ON COLUMN public.runs.retry_attempts IS 'Retries spent since the run last advanced its cursor (its handler threw); reset by a checkpoint that moves the cursor.';

COMMENT ON COLUMN public.runs.retry_budget IS 'The retries its handler allows (as registered in the runner that recorded its last failure); null before any.';

CREATE TABLE public.subscription_tickets (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    workspace_id uuid NOT NULL,
    api_key_id uuid NOT NULL,
    role text NOT NULL,
    ticket_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    CONSTRAINT subscription_tickets_role_check CHECK ((role = ANY (ARRAY['ADMIN'::text, 'OPERATOR'::text, 'VIEWER'::text])))
);

CREATE TABLE public.workers (
    id text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    stale_ms integer NOT NULL,
    handlers jsonb DEFAULT '[]'::jsonb NOT NULL,
    CONSTRAINT workers_id_check CHECK (((length(id) >= 1) AND (length(id) <= 300))),
    CONSTRAINT workers_stale_ms_check CHECK ((stale_ms > 0))
);

CREATE TABLE public.workspace_retention (
    workspace_id uuid NOT NULL,
    executions_days integer,
    failed_executions_days integer,
    audit_days integer,
    runs_days integer,
    events_hours integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workspace_retention_audit_days_check CHECK (((audit_days >= 0) AND (audit_days <= 36500))),
    CONSTRAINT workspace_retention_events_hours_check CHECK (((events_hours >= 1) AND (events_hours <= 876000))),
    CONSTRAINT workspace_retention_executions_days_check CHECK (((executions_days >= 0) AND (executions_days <= 36500))),
    CONSTRAINT workspace_retention_failed_executions_days_check CHECK (((failed_executions_days >= 0) AND (failed_executions_days <= 36500))),
    CONSTRAINT workspace_retention_runs_days_check CHECK (((runs_days >= 0) AND (runs_days <= 36500)))
);

CREATE TABLE public.workspaces (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    slug text NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    events_pruned_through bigint DEFAULT 0 NOT NULL,
    cursor_key bytea DEFAULT decode(replace(((gen_random_uuid())::text || (gen_random_uuid())::text), '-'::text, ''::text), 'hex'::text) NOT NULL,
    concurrency_limit integer,
    CONSTRAINT workspaces_concurrency_limit_check CHECK (((concurrency_limit >= 1) AND (concurrency_limit <= 100000))),
    CONSTRAINT workspaces_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT workspaces_slug_check CHECK ((slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'::text))
);

COMMENT ON COLUMN public.workspaces.concurrency_limit IS 'Most attempts in flight at once across the workspace''s endpoints (INTERNAL ones apart), across all workers; null: no cap.';

ALTER TABLE ONLY public.events ATTACH PARTITION public.events_g0 FOR VALUES IN (0);

ALTER TABLE ONLY public.events ATTACH PARTITION public.events_g1 FOR VALUES IN (1);

ALTER TABLE ONLY public.alert_cursors
    ADD CONSTRAINT alert_cursors_pkey PRIMARY KEY (workspace_id);

ALTER TABLE ONLY public.alert_notifications
    ADD CONSTRAINT alert_notifications_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.alert_notifications
    ADD CONSTRAINT alert_notifications_rule_id_subject_key_kind_window_start_key UNIQUE (rule_id, subject_key, kind, window_start);

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.alert_silences
    ADD CONSTRAINT alert_silences_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.alert_silences
    ADD CONSTRAINT alert_silences_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.alert_states
    ADD CONSTRAINT alert_states_pkey PRIMARY KEY (rule_id, subject_key);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.attempts
    ADD CONSTRAINT attempts_pkey PRIMARY KEY (execution_id, attempt_number);

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.configs
    ADD CONSTRAINT configs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.configs
    ADD CONSTRAINT configs_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.configs
    ADD CONSTRAINT configs_workspace_id_name_key UNIQUE (workspace_id, name);

ALTER TABLE ONLY public.endpoint_key_rate_buckets
    ADD CONSTRAINT endpoint_key_rate_buckets_pkey PRIMARY KEY (endpoint_id, concurrency_key);

ALTER TABLE ONLY public.endpoint_key_turns
    ADD CONSTRAINT endpoint_key_turns_pkey PRIMARY KEY (endpoint_id);

ALTER TABLE ONLY public.endpoint_rate_buckets
    ADD CONSTRAINT endpoint_rate_buckets_pkey PRIMARY KEY (endpoint_id);

ALTER TABLE ONLY public.endpoint_retry_after
    ADD CONSTRAINT endpoint_retry_after_pkey PRIMARY KEY (endpoint_id);

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.event_generations
    ADD CONSTRAINT event_generations_pkey PRIMARY KEY (gen);

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (id, gen);

ALTER TABLE ONLY public.events_g0
    ADD CONSTRAINT events_g0_pkey PRIMARY KEY (id, gen);

ALTER TABLE ONLY public.events_g1
    ADD CONSTRAINT events_g1_pkey PRIMARY KEY (id, gen);

ALTER TABLE ONLY public.execution_children
    ADD CONSTRAINT execution_children_pkey PRIMARY KEY (parent_execution_id);

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_job_id_scheduled_for_key UNIQUE (job_id, scheduled_for);

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.findings
    ADD CONSTRAINT findings_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.findings
    ADD CONSTRAINT findings_run_id_kind_resource_id_key UNIQUE (run_id, kind, resource_id);

ALTER TABLE ONLY public.interval_abandoned
    ADD CONSTRAINT interval_abandoned_pkey PRIMARY KEY (name, epoch);

ALTER TABLE ONLY public.interval_handlers
    ADD CONSTRAINT interval_handlers_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.job_dependencies
    ADD CONSTRAINT job_dependencies_pkey PRIMARY KEY (job_id, prerequisite_id);

ALTER TABLE ONLY public.jobgate_migrations
    ADD CONSTRAINT jobgate_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.payload_specs
    ADD CONSTRAINT payload_specs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.payload_specs
    ADD CONSTRAINT payload_specs_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.payload_specs
    ADD CONSTRAINT payload_specs_workspace_id_name_key UNIQUE (workspace_id, name);

ALTER TABLE ONLY public.retention_slices
    ADD CONSTRAINT retention_slices_pkey PRIMARY KEY (workspace_id, kind);

ALTER TABLE ONLY public.run_schedules
    ADD CONSTRAINT run_schedules_pkey PRIMARY KEY (workspace_id, name);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_workspace_id_id_key UNIQUE (workspace_id, id);

ALTER TABLE ONLY public.subscription_tickets
    ADD CONSTRAINT subscription_tickets_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.subscription_tickets
    ADD CONSTRAINT subscription_tickets_ticket_hash_key UNIQUE (ticket_hash);

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.workspace_retention
    ADD CONSTRAINT workspace_retention_pkey PRIMARY KEY (workspace_id);

ALTER TABLE ONLY public.workspaces
    ADD CONSTRAINT workspaces_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.workspaces
    ADD CONSTRAINT workspaces_slug_key UNIQUE (slug);

CREATE INDEX alert_notifications_workspace_created ON public.alert_notifications USING btree (workspace_id, created_at DESC, id DESC);

CREATE UNIQUE INDEX alert_rules_live_name ON public.alert_rules USING btree (workspace_id, name) WHERE (deleted_at IS NULL);

CREATE INDEX alert_rules_workspace_created ON public.alert_rules USING btree (workspace_id, created_at DESC, id DESC);

CREATE INDEX alert_silences_rule_live ON public.alert_silences USING btree (rule_id, ends_at) WHERE (ended_at IS NULL);

CREATE INDEX alert_silences_workspace_created ON public.alert_silences USING btree (workspace_id, created_at DESC, id DESC);

CREATE UNIQUE INDEX alert_states_id ON public.alert_states USING btree (id);

CREATE INDEX alert_states_workspace_firing ON public.alert_states USING btree (workspace_id) WHERE firing;

CREATE INDEX audit_log_workspace ON public.audit_log USING btree (workspace_id, id DESC);

CREATE UNIQUE INDEX batches_key ON public.batches USING btree (workspace_id, key) WHERE (key IS NOT NULL);

CREATE INDEX batches_on_complete ON public.batches USING btree (on_complete_job_id) WHERE (on_complete_job_id IS NOT NULL);

CREATE INDEX batches_workspace_created ON public.batches USING btree (workspace_id, created_at DESC, id DESC);

CREATE INDEX endpoint_key_rate_buckets_recent ON public.endpoint_key_rate_buckets USING btree (endpoint_id, refilled_at);

CREATE UNIQUE INDEX endpoints_live_name ON public.endpoints USING btree (workspace_id, name) WHERE (archived_at IS NULL);

CREATE INDEX events_created ON ONLY public.events USING brin (created_at);

CREATE INDEX events_g0_created ON public.events_g0 USING brin (created_at);

CREATE INDEX events_replay ON ONLY public.events USING btree (workspace_id, topic, id);

CREATE INDEX events_g0_replay ON public.events_g0 USING btree (workspace_id, topic, id);

CREATE INDEX events_g1_created_at_idx ON public.events_g1 USING brin (created_at);

CREATE INDEX events_g1_workspace_id_topic_id_idx ON public.events_g1 USING btree (workspace_id, topic, id);

CREATE INDEX executions_blocked ON public.executions USING btree (job_id) WHERE blocked;

CREATE INDEX executions_due ON public.executions USING btree (run_after, id) WHERE (status = 'PENDING'::text);

CREATE INDEX executions_due_priority ON public.executions USING btree (priority DESC, run_after, id) WHERE ((status = 'PENDING'::text) AND (NOT gated) AND (NOT blocked));

CREATE INDEX executions_endpoint_created ON public.executions USING btree (endpoint_id, created_at DESC, id DESC);

CREATE INDEX executions_failed_created ON public.executions USING btree (workspace_id, created_at DESC, id DESC) WHERE (status = 'FAILED'::text);

CREATE INDEX executions_gated_due ON public.executions USING btree (endpoint_id, priority DESC, run_after, id) WHERE ((status = 'PENDING'::text) AND gated AND (NOT blocked));

CREATE INDEX executions_job_created ON public.executions USING btree (job_id, created_at DESC, id DESC);

CREATE INDEX executions_last_error_trgm ON public.executions USING gin (last_error public.gin_trgm_ops) WHERE (last_error IS NOT NULL);

CREATE UNIQUE INDEX executions_live_lock_key ON public.executions USING btree (workspace_id, lock_key) WHERE ((lock_key IS NOT NULL) AND (status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text])));

CREATE INDEX executions_pending_key ON public.executions USING btree (endpoint_id, concurrency_key, priority DESC, run_after, id) WHERE ((status = 'PENDING'::text) AND gated AND (NOT blocked));

CREATE UNIQUE INDEX executions_request_id ON public.executions USING btree (job_id, request_id) WHERE (request_id IS NOT NULL);

CREATE INDEX executions_running_endpoint ON public.executions USING btree (endpoint_id) WHERE (status = 'RUNNING'::text);

CREATE INDEX executions_running_workspace ON public.executions USING btree (workspace_id) WHERE (status = 'RUNNING'::text);

CREATE INDEX executions_workspace_attempt_started ON public.executions USING btree (workspace_id, attempt_started_at) INCLUDE (run_after) WHERE (attempt_started_at IS NOT NULL);

CREATE INDEX executions_workspace_created ON public.executions USING btree (workspace_id, created_at DESC, id DESC);

CREATE INDEX executions_workspace_failed_endpoint ON public.executions USING btree (workspace_id, endpoint_id) WHERE (status = 'FAILED'::text);

CREATE INDEX executions_workspace_finished ON public.executions USING btree (workspace_id, finished_at) INCLUDE (status, endpoint_id) WHERE (finished_at IS NOT NULL);

CREATE INDEX executions_workspace_live ON public.executions USING btree (workspace_id, endpoint_id, job_id, status) WHERE (status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text]));

CREATE INDEX findings_run ON public.findings USING btree (run_id, id);

CREATE INDEX interval_handlers_due ON public.interval_handlers USING btree (next_due_at) WHERE (owner IS NULL);

CREATE INDEX job_dependencies_prerequisite ON public.job_dependencies USING btree (prerequisite_id, job_id);

CREATE INDEX jobs_batch ON public.jobs USING btree (batch_id, id) WHERE (batch_id IS NOT NULL);

CREATE UNIQUE INDEX jobs_idempotency_key ON public.jobs USING btree (workspace_id, endpoint_id, idempotency_key);

CREATE INDEX jobs_idempotency_search ON public.jobs USING btree (workspace_id, idempotency_key text_pattern_ops) WHERE (idempotency_key IS NOT NULL);

CREATE UNIQUE INDEX jobs_live_schedule_name ON public.jobs USING btree (workspace_id, schedule_name) WHERE ((schedule_name IS NOT NULL) AND (status <> 'RETIRED'::text));

CREATE INDEX jobs_name_search ON public.jobs USING btree (workspace_id, lower(name) text_pattern_ops) WHERE (name IS NOT NULL);

CREATE INDEX jobs_next_fire ON public.jobs USING btree (next_fire_at) WHERE ((status = 'ACTIVE'::text) AND (next_fire_at IS NOT NULL));

CREATE INDEX jobs_parent_execution ON public.jobs USING btree (parent_execution_id, id) WHERE (parent_execution_id IS NOT NULL);

CREATE INDEX jobs_workspace_created ON public.jobs USING btree (workspace_id, created_at DESC, id DESC);

CREATE INDEX jobs_workspace_prunable ON public.jobs USING btree (workspace_id, created_at, id) WHERE ((kind <> 'CRON'::text) OR (status = 'RETIRED'::text));

CREATE INDEX retention_slices_due ON public.retention_slices USING btree (next_due_at);

CREATE INDEX run_schedules_due ON public.run_schedules USING btree (next_due_at);

CREATE UNIQUE INDEX runs_one_live_per_name ON public.runs USING btree (workspace_id, name) WHERE (status = ANY (ARRAY['RUNNING'::text, 'CANCEL_REQUESTED'::text, 'PAUSED'::text]));

CREATE INDEX runs_owned_heartbeat ON public.runs USING btree (heartbeat_at) WHERE ((status = ANY (ARRAY['RUNNING'::text, 'CANCEL_REQUESTED'::text])) AND (owner IS NOT NULL));

CREATE INDEX runs_unowned ON public.runs USING btree (name) WHERE ((status = ANY (ARRAY['RUNNING'::text, 'CANCEL_REQUESTED'::text])) AND (owner IS NULL));

CREATE INDEX runs_workspace_created ON public.runs USING btree (workspace_id, created_at DESC, id DESC);

CREATE INDEX runs_workspace_name_created ON public.runs USING btree (workspace_id, name, created_at DESC, id DESC);

CREATE INDEX subscription_tickets_expires ON public.subscription_tickets USING btree (expires_at);

CREATE INDEX workers_heartbeat ON public.workers USING btree (heartbeat_at);

ALTER INDEX public.events_created ATTACH PARTITION public.events_g0_created;

ALTER INDEX public.events_pkey ATTACH PARTITION public.events_g0_pkey;

ALTER INDEX public.events_replay ATTACH PARTITION public.events_g0_replay;

ALTER INDEX public.events_created ATTACH PARTITION public.events_g1_created_at_idx;

ALTER INDEX public.events_pkey ATTACH PARTITION public.events_g1_pkey;

ALTER INDEX public.events_replay ATTACH PARTITION public.events_g1_workspace_id_topic_id_idx;

CREATE TRIGGER alert_notifications_events_insert AFTER INSERT ON public.alert_notifications REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_alerts_insert();

CREATE TRIGGER batches_events_update AFTER UPDATE ON public.batches REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_batches_update();

CREATE TRIGGER endpoints_capped_insert BEFORE INSERT ON public.endpoints FOR EACH ROW EXECUTE FUNCTION public.jobgate_endpoint_capped();

CREATE TRIGGER endpoints_gate AFTER UPDATE OF concurrency_limit, rate_limit_count, key_concurrency_limit, key_rate_limit_count, workspace_capped ON public.endpoints FOR EACH ROW WHEN ((public.jobgate_endpoint_limited(old.*) <> public.jobgate_endpoint_limited(new.*))) EXECUTE FUNCTION public.jobgate_endpoint_gate();

CREATE TRIGGER executions_batch_member_ends BEFORE UPDATE OF status ON public.executions FOR EACH ROW WHEN ((new.has_dependents AND (new.trigger = 'SCHEDULE'::text) AND (new.batch_outcome IS NULL) AND (new.status = ANY (ARRAY['SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text])) AND (old.status IS DISTINCT FROM new.status))) EXECUTE FUNCTION public.jobgate_batch_member_ends();

CREATE TRIGGER executions_ended AFTER UPDATE ON public.executions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_executions_ended();

CREATE TRIGGER executions_events_insert AFTER INSERT ON public.executions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_executions_insert();

CREATE TRIGGER executions_events_update AFTER UPDATE ON public.executions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_executions_update();

CREATE TRIGGER executions_gate_insert BEFORE INSERT ON public.executions FOR EACH ROW WHEN (((new.gated IS NULL) OR (new.job_held IS NULL))) EXECUTE FUNCTION public.jobgate_execution_gate();

CREATE TRIGGER executions_gate_pending BEFORE UPDATE OF status ON public.executions FOR EACH ROW WHEN (((new.status = 'PENDING'::text) AND (old.status <> 'PENDING'::text))) EXECUTE FUNCTION public.jobgate_execution_gate();

CREATE TRIGGER executions_notify_insert AFTER INSERT ON public.executions REFERENCING NEW TABLE AS inserted_executions FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_notify_work();

CREATE TRIGGER executions_parent_cancelled AFTER UPDATE OF status, cancel_requested_at ON public.executions FOR EACH ROW WHEN ((((new.status = 'CANCELLED'::text) AND (old.status IS DISTINCT FROM 'CANCELLED'::text)) OR ((new.cancel_requested_at IS NOT NULL) AND (old.cancel_requested_at IS NULL)))) EXECUTE FUNCTION public.jobgate_parent_cancelled();

CREATE TRIGGER executions_pin_input BEFORE INSERT ON public.executions FOR EACH ROW WHEN ((new.input IS NULL)) EXECUTE FUNCTION public.jobgate_pin_execution_input();

CREATE TRIGGER findings_events_insert AFTER INSERT ON public.findings REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_findings_insert();

CREATE TRIGGER findings_events_mark BEFORE INSERT ON public.findings FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_findings_mark();

CREATE TRIGGER interval_handlers_catalog AFTER INSERT OR DELETE OR UPDATE ON public.interval_handlers FOR EACH ROW EXECUTE FUNCTION public.jobgate_catalog_hint();

CREATE TRIGGER interval_handlers_notify_due AFTER UPDATE OF next_due_at ON public.interval_handlers FOR EACH ROW WHEN (((new.owner IS NULL) AND (new.next_due_at <= now()) AND (new.next_due_at IS DISTINCT FROM old.next_due_at))) EXECUTE FUNCTION public.jobgate_notify_interval_due();

CREATE TRIGGER interval_handlers_streak BEFORE UPDATE ON public.interval_handlers FOR EACH ROW EXECUTE FUNCTION public.jobgate_interval_streak();

CREATE TRIGGER interval_handlers_tick_end BEFORE UPDATE ON public.interval_handlers FOR EACH ROW EXECUTE FUNCTION public.jobgate_interval_tick_end();

CREATE TRIGGER jobs_events_insert AFTER INSERT ON public.jobs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_jobs_insert();

CREATE TRIGGER jobs_events_update AFTER UPDATE ON public.jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_jobs_update();

CREATE TRIGGER jobs_held AFTER UPDATE OF status ON public.jobs FOR EACH ROW WHEN ((old.status IS DISTINCT FROM new.status)) EXECUTE FUNCTION public.jobgate_job_held();

CREATE TRIGGER jobs_withdraw_ahead BEFORE UPDATE ON public.jobs FOR EACH ROW WHEN (((old.ahead_at > now()) AND ((new.status IS DISTINCT FROM old.status) OR (new.input IS DISTINCT FROM old.input) OR (new.endpoint_id IS DISTINCT FROM old.endpoint_id) OR (new.max_attempts IS DISTINCT FROM old.max_attempts) OR (new.priority IS DISTINCT FROM old.priority) OR (new.concurrency_key IS DISTINCT FROM old.concurrency_key) OR (new.lock_key IS DISTINCT FROM old.lock_key) OR (new.cron_expression IS DISTINCT FROM old.cron_expression) OR (new.timezone IS DISTINCT FROM old.timezone) OR (new.starts_at IS DISTINCT FROM old.starts_at) OR (new.ends_at IS DISTINCT FROM old.ends_at) OR (new.overlap_policy IS DISTINCT FROM old.overlap_policy) OR (new.ahead_at IS DISTINCT FROM old.ahead_at)))) EXECUTE FUNCTION public.jobgate_withdraw_ahead();

CREATE TRIGGER run_schedules_catalog AFTER INSERT OR DELETE OR UPDATE ON public.run_schedules FOR EACH ROW EXECUTE FUNCTION public.jobgate_catalog_hint();

CREATE TRIGGER runs_catalog_insert AFTER INSERT ON public.runs FOR EACH ROW EXECUTE FUNCTION public.jobgate_catalog_hint();

CREATE TRIGGER runs_catalog_status AFTER UPDATE ON public.runs FOR EACH ROW WHEN ((old.status IS DISTINCT FROM new.status)) EXECUTE FUNCTION public.jobgate_catalog_hint();

CREATE TRIGGER runs_events_insert AFTER INSERT ON public.runs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_runs_insert();

CREATE TRIGGER runs_events_update AFTER UPDATE ON public.runs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.jobgate_events_runs_update();

CREATE TRIGGER workers_catalog_insert AFTER INSERT OR DELETE ON public.workers FOR EACH ROW EXECUTE FUNCTION public.jobgate_catalog_hint();

CREATE TRIGGER workers_catalog_update AFTER UPDATE ON public.workers FOR EACH ROW WHEN (((old.handlers IS DISTINCT FROM new.handlers) OR (old.heartbeat_at <= (now() - make_interval(secs => (((old.stale_ms)::numeric / 1000.0))::double precision))))) EXECUTE FUNCTION public.jobgate_catalog_hint();

CREATE TRIGGER workspaces_cap AFTER UPDATE OF concurrency_limit ON public.workspaces FOR EACH ROW WHEN (((old.concurrency_limit IS NULL) <> (new.concurrency_limit IS NULL))) EXECUTE FUNCTION public.jobgate_workspace_cap();

CREATE TRIGGER workspaces_provision AFTER INSERT ON public.workspaces FOR EACH ROW EXECUTE FUNCTION public.jobgate_provision_workspace();

CREATE TRIGGER workspaces_provision_alerts AFTER INSERT ON public.workspaces FOR EACH ROW EXECUTE FUNCTION public.jobgate_provision_workspace_alerts();

CREATE TRIGGER workspaces_provision_retention AFTER INSERT ON public.workspaces FOR EACH ROW EXECUTE FUNCTION public.jobgate_provision_retention();

ALTER TABLE ONLY public.alert_cursors
    ADD CONSTRAINT alert_cursors_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.alert_notifications
    ADD CONSTRAINT alert_notifications_silence FOREIGN KEY (workspace_id, silence_id) REFERENCES public.alert_silences(workspace_id, id);

ALTER TABLE ONLY public.alert_notifications
    ADD CONSTRAINT alert_notifications_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.alert_notifications
    ADD CONSTRAINT alert_notifications_workspace_id_rule_id_fkey FOREIGN KEY (workspace_id, rule_id) REFERENCES public.alert_rules(workspace_id, id);

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_workspace_id_webhook_endpoint_id_fkey FOREIGN KEY (workspace_id, webhook_endpoint_id) REFERENCES public.endpoints(workspace_id, id);

ALTER TABLE ONLY public.alert_silences
    ADD CONSTRAINT alert_silences_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.alert_silences
    ADD CONSTRAINT alert_silences_ended_by_key_id_fkey FOREIGN KEY (ended_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.alert_silences
    ADD CONSTRAINT alert_silences_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.alert_silences
    ADD CONSTRAINT alert_silences_workspace_id_rule_id_fkey FOREIGN KEY (workspace_id, rule_id) REFERENCES public.alert_rules(workspace_id, id);

ALTER TABLE ONLY public.alert_states
    ADD CONSTRAINT alert_states_acknowledged_by_key_id_fkey FOREIGN KEY (acknowledged_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.alert_states
    ADD CONSTRAINT alert_states_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES public.alert_rules(id);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_actor_key_id_fkey FOREIGN KEY (actor_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.batches
    ADD CONSTRAINT batches_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.configs
    ADD CONSTRAINT configs_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.configs
    ADD CONSTRAINT configs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.endpoint_key_rate_buckets
    ADD CONSTRAINT endpoint_key_rate_buckets_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.endpoint_key_turns
    ADD CONSTRAINT endpoint_key_turns_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.endpoint_rate_buckets
    ADD CONSTRAINT endpoint_rate_buckets_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.endpoint_retry_after
    ADD CONSTRAINT endpoint_retry_after_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_aimed_by_key_id_fkey FOREIGN KEY (aimed_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_workspace_id_config_id_fkey FOREIGN KEY (workspace_id, config_id) REFERENCES public.configs(workspace_id, id);

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.endpoints
    ADD CONSTRAINT endpoints_workspace_id_payload_spec_id_fkey FOREIGN KEY (workspace_id, payload_spec_id) REFERENCES public.payload_specs(workspace_id, id);

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_workspace_id_endpoint_id_fkey FOREIGN KEY (workspace_id, endpoint_id) REFERENCES public.endpoints(workspace_id, id);

ALTER TABLE ONLY public.executions
    ADD CONSTRAINT executions_workspace_id_job_id_fkey FOREIGN KEY (workspace_id, job_id) REFERENCES public.jobs(workspace_id, id);

ALTER TABLE ONLY public.findings
    ADD CONSTRAINT findings_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.findings
    ADD CONSTRAINT findings_workspace_id_run_id_fkey FOREIGN KEY (workspace_id, run_id) REFERENCES public.runs(workspace_id, id);

ALTER TABLE ONLY public.interval_abandoned
    ADD CONSTRAINT interval_abandoned_name_fkey FOREIGN KEY (name) REFERENCES public.interval_handlers(name);

ALTER TABLE ONLY public.job_dependencies
    ADD CONSTRAINT job_dependencies_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_batch_id_fkey FOREIGN KEY (batch_id) REFERENCES public.batches(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_workspace_id_endpoint_id_fkey FOREIGN KEY (workspace_id, endpoint_id) REFERENCES public.endpoints(workspace_id, id);

ALTER TABLE ONLY public.payload_specs
    ADD CONSTRAINT payload_specs_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.payload_specs
    ADD CONSTRAINT payload_specs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.retention_slices
    ADD CONSTRAINT retention_slices_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.run_schedules
    ADD CONSTRAINT run_schedules_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_created_by_key_id_fkey FOREIGN KEY (created_by_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.subscription_tickets
    ADD CONSTRAINT subscription_tickets_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES public.api_keys(id);

ALTER TABLE ONLY public.subscription_tickets
    ADD CONSTRAINT subscription_tickets_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

ALTER TABLE ONLY public.workspace_retention
    ADD CONSTRAINT workspace_retention_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES public.workspaces(id);

-- Fixes to recoverable runs, interval handlers and run schedules (review of issue #4).

-- The staleness window of the runner that owns a run, recorded when it takes the run: the crash
-- sweep judges a run by its owner's window, not by the (possibly much shorter) window of the
-- worker that happens to sweep. Null on rows taken before this migration (the sweeper's applies).
alter table runs add column stale_ms integer check (stale_ms > 0);

-- The crash sweep looks at owned, live runs only (few, whatever the number of finished runs).
create index runs_owned_heartbeat on runs (heartbeat_at)
  where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is not null;
-- The catalogue's last run per recoverable handler in a workspace (distinct on name, newest first).
create index runs_workspace_name_created on runs (workspace_id, name, created_at desc, id desc);

-- A tick past its timeout has its outcome (TIMEOUT) recorded at the deadline but stays owned
-- until its handler returns: no next tick starts beside a handler that ignores its signal.
alter table interval_handlers add column overrun boolean not null default false;
alter table interval_handlers add constraint interval_handlers_overrun_owned check (not overrun or owner is not null);

-- Why a paused run is paused: CANCELLED (an operator's cancelRun), CRASHED (its worker stopped
-- heartbeating), HANDLER (its handler returned paused on its own). A schedule's tick resumes
-- CRASHED and HANDLER runs only; an operator's triggerRun resumes any.
alter table runs add column pause_kind text check (pause_kind in ('CANCELLED', 'CRASHED', 'HANDLER'));
update runs set pause_kind = case
    when pause_reason = 'cancelled by an operator' then 'CANCELLED'
    when pause_reason like 'its worker stopped heartbeating%' then 'CRASHED'
    else 'HANDLER' end
  where status = 'PAUSED';
alter table runs add constraint runs_pause_kind_when_paused check ((status = 'PAUSED') = (pause_kind is not null));

-- A schedule's tick that finds its run paused by an operator leaves it paused: HELD.
alter table run_schedules drop constraint run_schedules_last_tick_outcome_check;
alter table run_schedules add constraint run_schedules_last_tick_outcome_check
  check (last_tick_outcome in ('STARTED', 'RESUMED', 'ACTIVE', 'HELD'));

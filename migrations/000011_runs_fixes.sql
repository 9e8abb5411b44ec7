-- Fixes to recoverable runs, interval handlers and run schedules (review of issue #4).

-- The staleness window of the runner that owns a run, recorded when it takes the run: the crash
-- sweep judges a run by its owner's window, not by the (possibly much shorter) window of the
-- worker that happens to sweep. Null on rows taken before this migration (the sweeper's applies).
alter table runs add column stale_ms integer check (stale_ms > 0);

-- The crash sweep looks at owned, live runs only (few, whatever the number of finished runs).
create index runs_owned_heartbeat on runs (heartbeat_at)
  where status in ('RUNNING', 'CANCEL_REQUESTED') and owner is not null;

-- A tick past its timeout has its outcome (TIMEOUT) recorded at the deadline but stays owned
-- until its handler returns: no next tick starts beside a handler that ignores its signal.
alter table interval_handlers add column overrun boolean not null default false;
alter table interval_handlers add constraint interval_handlers_overrun_owned check (not overrun or owner is not null);

-- The handler catalogue, live: a hint on the events channel ('c') whenever what the catalogue
-- shows changes, for the gateway's handlerCatalog subscription to read it again. A hint only:
-- the catalogue is read from its tables, never from the payload, and a lost hint is made good
-- by the reads the hub makes when its listener (re)connects.
--
-- What changes it: a worker registering, stopping (its row deleted) or coming back after going
-- stale, or changing its handlers (heartbeats that change neither send nothing: a worker beats
-- every few seconds); an interval handler's row (a tick taken, its outcome, its next tick); a
-- recoverable's schedule ticking; a run starting or changing status (a recoverable's last run).
-- Row-level triggers: a presence heartbeat is an INSERT ... ON CONFLICT DO UPDATE, for which
-- statement-level INSERT triggers fire every time. NOTIFY folds identical hints of one
-- transaction into one.
--
-- A worker going stale (no heartbeat within its stale_ms) writes nothing: the gateway reads the
-- catalogue again when the first live worker would go stale (src/subscriptions/catalog-watch.ts).
create function jobgate_catalog_hint() returns trigger language plpgsql as $$
begin
  perform pg_notify('jobgate_events', 'c');
  return null;
end $$;

create trigger workers_catalog_insert after insert or delete on workers
  for each row execute function jobgate_catalog_hint();
create trigger workers_catalog_update after update on workers
  for each row when (
    old.handlers is distinct from new.handlers
    or old.heartbeat_at <= now() - make_interval(secs => old.stale_ms / 1000.0)
  )
  execute function jobgate_catalog_hint();

create trigger interval_handlers_catalog after insert or update or delete on interval_handlers
  for each row execute function jobgate_catalog_hint();

create trigger run_schedules_catalog after insert or update or delete on run_schedules
  for each row execute function jobgate_catalog_hint();

create trigger runs_catalog_insert after insert on runs
  for each row execute function jobgate_catalog_hint();
create trigger runs_catalog_status after update on runs
  for each row when (old.status is distinct from new.status)
  execute function jobgate_catalog_hint();

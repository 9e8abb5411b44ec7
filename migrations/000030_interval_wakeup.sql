-- A tick made due (triggerHandler, or a registration bringing it forward) wakes the workers, as a
-- new execution does (000002, jobgate_notify_work): without it a triggered tick waits for the
-- interval runner's next poll. Sent inside the writing transaction, so a worker woken by it sees
-- the tick due. A tick that is running (owned) is taken again by its own worker when it ends, so
-- only an idle one is announced. The payload names the handler: the worker's claim loop has
-- nothing to do with it (src/service/engine/worker.ts passes it to the interval runner).
create function jobgate_notify_interval_due() returns trigger language plpgsql as $$
begin
  perform pg_notify('jobgate_work', 'interval:' || new.name);
  return null;
end $$;

create trigger interval_handlers_notify_due after update of next_due_at on interval_handlers
  for each row when (new.owner is null and new.next_due_at <= now() and new.next_due_at is distinct from old.next_due_at)
  execute function jobgate_notify_interval_due();

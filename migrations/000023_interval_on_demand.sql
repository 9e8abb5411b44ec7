-- Interval handlers: on-demand handlers (no cadence), the ticks skipped while a tick ran, and
-- which tick the last outcome belongs to (so triggerHandler can wait for the tick it queued).

-- An on-demand handler has no period: it runs only when triggered (triggerHandler). While idle
-- and untriggered its next tick is 'infinity', which no take ever finds due.
alter table interval_handlers alter column every_ms drop not null;
comment on column interval_handlers.every_ms is
  'Period between ticks, in ms; null for an on-demand handler, which runs only when triggered.';

-- Ticks never overlap: the cadence ticks that fell while one ran coalesce into one, run right
-- after it. This counts the others (the ones that never ran), all time.
alter table interval_handlers add column skipped_ticks bigint not null default 0;
comment on column interval_handlers.skipped_ticks is
  'Ticks skipped because a tick was still running when they came due (all time).';

-- The epoch of the tick whose outcome last_* holds: a caller that triggered a tick waits for an
-- outcome of a later epoch than the one it saw.
alter table interval_handlers add column last_epoch bigint;
comment on column interval_handlers.last_epoch is
  'The epoch (take) of the tick whose outcome last_status, last_cause, last_error ... hold; null before the first outcome.';

-- Kept by trigger, as the error streak (000020) is, so every statement that ends a tick (the
-- outcome, the overrun release, the crash sweeps, the shutdown hand-back) counts alike.
create function jobgate_interval_tick_end() returns trigger language plpgsql as $$
begin
  if new.last_finished_at is distinct from old.last_finished_at then
    new.last_epoch := new.epoch;
  end if;
  -- A tick ends (its owner is cleared): the cadence ticks due while it ran, from its start to
  -- now, but for the one that runs right after it.
  if old.owner is not null and new.owner is null and old.every_ms is not null and old.run_started_at is not null then
    new.skipped_ticks := old.skipped_ticks
      + greatest(0, floor(extract(epoch from (now() - old.run_started_at)) * 1000 / old.every_ms)::bigint - 1);
  end if;
  return new;
end $$;
create trigger interval_handlers_tick_end before update on interval_handlers
  for each row execute function jobgate_interval_tick_end();

-- What happens to the cadence ticks that come due while a tick is still running
-- (src/service/engine/intervals/intervals.ts): `overlap`, set by the handler's registration.
--  - SKIP (the default): they are skipped, all of them; the next tick is the first period boundary
--    after the running one ends. Counted in skipped_ticks; its worker logs one warning with how
--    long the tick ran.
--  - QUEUE: as before (000023), they coalesce into one tick run right after the running one.
-- A tick queued on purpose (triggerHandler with force while one runs: `queued_after`) runs right
-- after under either policy; the take clears the mark.
alter table interval_handlers add column overlap text not null default 'SKIP' check (overlap in ('SKIP', 'QUEUE'));
comment on column interval_handlers.overlap is
  'Cadence ticks due while a tick runs: SKIP (skipped; the next is the first period boundary after it ends) or QUEUE (one tick right after it).';
alter table interval_handlers add column queued_after boolean not null default false;
comment on column interval_handlers.queued_after is
  'A forced trigger queued one tick right after the running one (runs under either overlap policy); cleared by the take.';

create or replace function jobgate_interval_tick_end() returns trigger language plpgsql as $$
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

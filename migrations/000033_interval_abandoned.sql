-- A tick whose handler ignores its signal and never returns no longer silences its handler
-- (src/service/engine/intervals/intervals.ts). Past its timeout (TIMEOUT recorded, the tick
-- overrun, 000023) and a grace after it, its worker abandons it: the slot is freed, so later ticks
-- run, while the handler's promise may still be running in that worker. Each abandoned handler
-- still running is a row here until it settles; a row whose worker is gone (its process took the
-- handler with it) is deleted by the sweep every worker runs.
alter table interval_handlers add column abandoned_total bigint not null default 0;
comment on column interval_handlers.abandoned_total is 'Ticks abandoned after their timeout and grace, their handler still running (all time).';

create table interval_abandoned (
  name         text not null references interval_handlers (name),
  worker_id    text not null,
  epoch        bigint not null,
  abandoned_at timestamptz not null default now(),
  primary key (name, epoch)
);

-- The periodic handler contract (src/service/engine/intervals/intervals.ts):
--  - a tick's outcome carries `extra`, JSON the handler returned beside its count (what it found,
--    a summary for the operator), kept with the last outcome like the count;
--  - a trigger with `force` marks the next tick forced (`force_next`): its handler is told to skip
--    its own grace window. The take hands the mark to the tick and clears it.
alter table interval_handlers add column last_extra jsonb;
comment on column interval_handlers.last_extra is
  'The JSON the last tick returned beside its count (OK only; null when it returned none).';
alter table interval_handlers add column force_next boolean not null default false;
comment on column interval_handlers.force_next is
  'A trigger with force made the next tick due: that tick runs with force (its handler skips its own grace window); cleared by the take.';

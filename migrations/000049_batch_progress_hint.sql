-- Batch progress, live: a batch whose counts or state moved sends `b:<batch id>` on the live hub's
-- channel (src/db/channels.ts), as a run's progress sends `r:<run id>` (000009). It is only a hint:
-- the hub reads the batch itself (src/subscriptions/hub/batch-watches.ts), and the notification
-- leaves with the transaction that moved the batch (the one that ends a member counts it, and
-- completes the batch, under its row lock), so a subscriber never sees an uncommitted count.
-- Updates that move none of them (the onComplete job set, updated_at alone) send nothing.
create function jobgate_events_batches_update() returns trigger language plpgsql as $$
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

create trigger batches_events_update after update on batches
  referencing old table as old_rows new table as new_rows
  for each statement execute function jobgate_events_batches_update();

-- Notifications written in one evaluation pass (a condition that fired and cleared in the same
-- pass: FIRING, then RESOLVED) shared one transaction's now(), so lists ordered by
-- (created_at, id) showed them in the random order of their uuids. clock_timestamp() moves on
-- between the statements of a transaction, so created_at follows the order they were written.
alter table alert_notifications alter column created_at set default clock_timestamp();

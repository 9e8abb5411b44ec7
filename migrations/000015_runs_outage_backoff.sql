-- A run handed back because jobgate's database failed it mid-run (src/service/engine/recoverable.ts)
-- is not taken again before resume_after: without it, a store call that kept failing while the
-- take and the hand-back still worked made a loop of takes (hundreds a second), each replaying
-- the batch since the last checkpoint. outage_hand_backs doubles the wait each time (1 s, 2 s,
-- 4 s ... at most a minute) and a checkpoint that commits resets it.
alter table runs add column resume_after timestamptz;
alter table runs add column outage_hand_backs integer not null default 0;

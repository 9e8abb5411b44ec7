-- Replays of live events (a subscription with an `after` cursor, or one catching up after a
-- burst) read one workspace's events of one topic after a cursor. Without this index each
-- page walks the primary key over every workspace's events; with it, a range of this one.
create index events_replay on events (workspace_id, topic, id);

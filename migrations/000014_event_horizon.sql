-- How far back a workspace's live events can still be replayed. Pruning (the reaper, past the
-- retention window) deletes a workspace's oldest events; a subscription resuming from a cursor
-- older than what was pruned would silently miss them. The highest id pruned is kept here, and a
-- stream asked to replay from before it is refused with CURSOR_EXPIRED instead
-- (src/service/live.ts). Event ids are global, so a workspace's own cannot tell a gap from a
-- quiet stretch; this mark can. Every event with an id above it is still kept.
alter table workspaces add column events_pruned_through bigint not null default 0;

-- Events pruned before this migration left no mark. Conservatively, each workspace's horizon
-- starts just below its oldest event still kept (nothing older can be replayed), or, for a
-- workspace with none kept, at the newest event id overall. A cursor from before that is
-- refused even if nothing was actually pruned: re-reading state is cheaper than a silent gap.
update workspaces w
set events_pruned_through = coalesce(
  (select min(e.id) - 1 from events e where e.workspace_id = w.id),
  (select coalesce(max(e.id), 0) from events e));

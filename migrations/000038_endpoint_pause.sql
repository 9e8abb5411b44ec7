-- Pausing an endpoint (flow control): while paused_at is set, none of its executions is claimed
-- (src/db/statements/claim.ts); attempts already running finish, and executions wait PENDING, in
-- their order, for the resume. A column of the endpoint, so a pause holds across restarts and for
-- every worker and gateway at once.
alter table endpoints add column paused_at timestamp with time zone;
comment on column endpoints.paused_at is 'When the endpoint was paused: its executions wait and none is claimed until it is resumed (then null). Attempts running when it was paused finish.';

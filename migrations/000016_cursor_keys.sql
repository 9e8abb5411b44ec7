-- Each workspace's key for sealing the cursors and ids of its events, findings and audit
-- entries (src/service/cursors.ts): those rows take ids from installation-wide sequences, which
-- shown as they are would let any key watch the whole installation's activity.
-- 32 random bytes from two v4 UUIDs (gen_random_uuid draws from the server's strong random
-- source; 244 random bits), evaluated per row, so every existing workspace gets its own.
alter table workspaces
  add column cursor_key bytea not null
  default decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');

-- Concurrency per key, with fair shares between keys (flow control). A job may carry a
-- concurrency key (e.g. a customer's id), pinned on each of its executions; an endpoint with a
-- key_concurrency_limit starts at most that many attempts per key at once, across every worker,
-- and its claims rotate between the keys with due work (src/db/statements/claim.ts), so a key
-- with a long backlog does not hold back one with a short one. Executions without a key share
-- one lane of their own, not limited per key.
--
-- Keys compare bytewise (collation "C"): the rotation's cursor is compared in SQL and in the
-- worker, which must agree on the order.
alter table jobs add column concurrency_key text collate "C"
  constraint jobs_concurrency_key_check check (length(concurrency_key) between 1 and 200);
comment on column jobs.concurrency_key is 'The key its executions count against for their endpoint''s key_concurrency_limit (e.g. a customer''s id); null: none.';

-- On executions, '' rather than null for none: the executions without a key are one more lane of
-- the rotation, found and read in order through the same index as the keys (an equality, where
-- "is null" would not give the index's order).
alter table executions add column concurrency_key text collate "C" not null default '';
comment on column executions.concurrency_key is 'Its job''s concurrency key when it was created (pinned); '''' for none.';

alter table endpoints add column key_concurrency_limit integer
  constraint endpoints_key_concurrency_limit_check check (key_concurrency_limit between 1 and 10000);
comment on column endpoints.key_concurrency_limit is 'Most attempts in flight at once per concurrency key, across all workers; null: no per-key limit. Its claims rotate between keys.';

-- The rotation's cursor: the key the last claim of the endpoint reached ('' is the lane of
-- executions without a key). Read and written under the endpoint's advisory lock.
create table endpoint_key_turns (
  endpoint_id uuid primary key references endpoints (id) on delete cascade,
  last_key text collate "C" not null
);
comment on table endpoint_key_turns is 'Where each keyed endpoint''s rotation between concurrency keys stands: the next claim starts after last_key.';

-- The keyed claim walks the distinct keys of an endpoint's pending executions (one probe each)
-- and reads each key's due work in claim order.
create index executions_pending_key on executions (endpoint_id, concurrency_key, priority desc, run_after, id)
  where status = 'PENDING';

-- Gated executions: a pending execution of an endpoint with a limit (a concurrency, a rate or a
-- per-key limit) is claimed only by the claim's limited path, under its endpoint's advisory lock.
-- The unlimited path walked every pending execution in claim order and passed over the limited
-- endpoints' ones: with a backlog behind a rate limit (what rate limits are for), every claim of
-- every worker read that whole backlog first (20,000 executions: 10 to 60 ms a claim). The flag
-- takes them out of the unlimited path's indexes, and keeps the limited path's indexes to them.
--
-- The flag is kept exact by the database, whichever statement makes an execution PENDING or
-- changes an endpoint's limits:
-- * an execution that becomes PENDING (inserted, retried, handed back, re-driven) reads its
--   endpoint's limits with FOR SHARE, which conflicts with any update of the endpoint's row: it
--   waits for an update that has not committed, then reads the version it committed;
-- * an update of the endpoint's row waits in turn for the transactions that read it so, and when
--   its limits are set or cleared, sets the flag of its pending executions in a statement of its
--   own, which sees every one of them.
-- So no pending execution commits with a flag its endpoint's committed limits contradict. (Not
-- FOR KEY SHARE, which the foreign key takes anyway: it does not conflict with an update that
-- leaves the key alone, and would read the version before it. The claim paths also check the
-- endpoint's limits themselves: the flag is where to look.)
alter table executions add column gated boolean not null default false;
comment on column executions.gated is
  'PENDING under an endpoint with a concurrency, rate or per-key limit: claimed only under that endpoint''s advisory lock. Kept by triggers.';

create function jobgate_endpoint_limited(en endpoints) returns boolean language sql immutable as $$
  select en.concurrency_limit is not null or en.rate_limit_count is not null or en.key_concurrency_limit is not null
$$;

create function jobgate_execution_gate() returns trigger language plpgsql as $$
begin
  select jobgate_endpoint_limited(en) into new.gated from endpoints en where en.id = new.endpoint_id for share;
  new.gated := coalesce(new.gated, false);
  return new;
end $$;

create trigger executions_gate_insert before insert on executions
  for each row when (new.status = 'PENDING') execute function jobgate_execution_gate();
create trigger executions_gate_pending before update of status on executions
  for each row when (new.status = 'PENDING' and old.status <> 'PENDING') execute function jobgate_execution_gate();

create function jobgate_endpoint_gate() returns trigger language plpgsql as $$
begin
  -- In id order, as every statement that locks several executions (see lease.ts).
  update executions e set gated = jobgate_endpoint_limited(new)
  from (select x.id from executions x
        where x.endpoint_id = new.id and x.status = 'PENDING' and x.gated <> jobgate_endpoint_limited(new)
        order by x.id for no key update) l
  where e.id = l.id and e.status = 'PENDING';
  return null;
end $$;

create trigger endpoints_gate after update of concurrency_limit, rate_limit_count, key_concurrency_limit on endpoints
  for each row when (jobgate_endpoint_limited(old) <> jobgate_endpoint_limited(new))
  execute function jobgate_endpoint_gate();

update executions e set gated = true
from endpoints en
where en.id = e.endpoint_id and e.status = 'PENDING' and jobgate_endpoint_limited(en);

-- The unlimited path: the priority levels present and each level's due work, ungated only.
drop index executions_due_priority;
create index executions_due_priority on executions (priority desc, run_after, id) where status = 'PENDING' and not gated;
-- The limited path: a limited endpoint's levels and due work (one range per level).
create index executions_gated_due on executions (endpoint_id, priority desc, run_after, id) where status = 'PENDING' and gated;
-- The keyed path (an endpoint with a per-key limit is gated): ungated executions no longer pay for it.
drop index executions_pending_key;
create index executions_pending_key on executions (endpoint_id, concurrency_key, priority desc, run_after, id)
  where status = 'PENDING' and gated;

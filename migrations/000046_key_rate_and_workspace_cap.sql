-- Flow control, the last two levers: a rate limit per concurrency key, and a workspace-wide cap
-- on attempts in flight.
--
-- A key's rate limit: at most key_rate_limit_count starts per key_rate_limit_period_ms for each
-- concurrency key of the endpoint, in bursts of up to key_rate_limit_burst (a token bucket per
-- key, as endpoint_rate_buckets is per endpoint). Executions without a key are not limited per
-- key, as with key_concurrency_limit. Read and spent by the keyed claim under the endpoint's
-- advisory lock (src/db/statements/claim.ts), so exact across workers.
alter table endpoints
  add column key_rate_limit_count integer,
  add column key_rate_limit_period_ms integer,
  add column key_rate_limit_burst integer,
  add constraint endpoints_key_rate_limit_check check (
    (key_rate_limit_count is null and key_rate_limit_period_ms is null and key_rate_limit_burst is null)
    or (key_rate_limit_count > 0 and key_rate_limit_period_ms > 0 and key_rate_limit_burst > 0));
comment on column endpoints.key_rate_limit_count is 'Rate limit per concurrency key: at most this many starts per key_rate_limit_period_ms for each key (all three null: no limit).';
comment on column endpoints.key_rate_limit_period_ms is 'Rate limit per concurrency key: the period, in milliseconds.';
comment on column endpoints.key_rate_limit_burst is 'Rate limit per concurrency key: the most starts of one key at once after a quiet spell.';

create table endpoint_key_rate_buckets (
  endpoint_id uuid not null references endpoints (id) on delete cascade,
  concurrency_key text collate "C" not null,
  tokens double precision not null,
  refilled_at timestamp with time zone not null,
  primary key (endpoint_id, concurrency_key)
);
comment on table endpoint_key_rate_buckets is 'The token bucket of each concurrency key of a key-rate-limited endpoint that has started work: its tokens as of refilled_at (database clock). No row: a full bucket (the pruner deletes full ones).';
-- A bucket can be short of a whole token only if it was written within one token's time
-- (period / count) ago: the claim finds the dry keys of an endpoint by this range, not by reading
-- every key's bucket.
create index endpoint_key_rate_buckets_recent on endpoint_key_rate_buckets (endpoint_id, refilled_at);

-- The workspace's cap: at most concurrency_limit attempts in flight at once across all of its
-- endpoints (jobgate's own INTERNAL ones apart: alert deliveries and housekeeping must not wait
-- behind a tenant's backlog). Each endpoint carries whether its workspace caps it
-- (workspace_capped, kept by the triggers below), so that the one definition of a limited
-- endpoint, and the gating of its executions (000044), read the endpoint's row alone.
alter table workspaces add column concurrency_limit integer
  constraint workspaces_concurrency_limit_check check (concurrency_limit between 1 and 100000);
comment on column workspaces.concurrency_limit is 'Most attempts in flight at once across the workspace''s endpoints (INTERNAL ones apart), across all workers; null: no cap.';

alter table endpoints add column workspace_capped boolean not null default false;
comment on column endpoints.workspace_capped is 'Its workspace has a concurrency_limit and it is not INTERNAL: its attempts count against that cap. Kept by triggers.';

create or replace function jobgate_endpoint_limited(en endpoints) returns boolean language sql immutable as $$
  select en.concurrency_limit is not null or en.rate_limit_count is not null or en.key_concurrency_limit is not null
      or en.key_rate_limit_count is not null or en.workspace_capped
$$;

drop trigger endpoints_gate on endpoints;
create trigger endpoints_gate
  after update of concurrency_limit, rate_limit_count, key_concurrency_limit, key_rate_limit_count, workspace_capped on endpoints
  for each row when (jobgate_endpoint_limited(old) <> jobgate_endpoint_limited(new))
  execute function jobgate_endpoint_gate();

-- A new endpoint reads its workspace's cap FOR SHARE, as a new execution reads its endpoint's
-- limits (000044): it waits for a change of the cap that has not committed, and a change of the
-- cap waits for it in turn, then sees it.
create function jobgate_endpoint_capped() returns trigger language plpgsql as $$
begin
  select w.concurrency_limit is not null and new.type <> 'INTERNAL' into new.workspace_capped
  from workspaces w where w.id = new.workspace_id for share;
  new.workspace_capped := coalesce(new.workspace_capped, false);
  return new;
end $$;
create trigger endpoints_capped_insert before insert on endpoints
  for each row execute function jobgate_endpoint_capped();

-- Setting or clearing the cap marks the workspace's endpoints, whose own trigger (endpoints_gate)
-- then sets their pending executions' flags. In id order, as every statement that locks several rows.
create function jobgate_workspace_cap() returns trigger language plpgsql as $$
begin
  update endpoints en set workspace_capped = (new.concurrency_limit is not null and en.type <> 'INTERNAL')
  from (select x.id from endpoints x
        where x.workspace_id = new.id and x.workspace_capped <> (new.concurrency_limit is not null and x.type <> 'INTERNAL')
        order by x.id for no key update) l
  where en.id = l.id;
  return null;
end $$;
create trigger workspaces_cap after update of concurrency_limit on workspaces
  for each row when ((old.concurrency_limit is null) <> (new.concurrency_limit is null))
  execute function jobgate_workspace_cap();

-- The cap counts the workspace's attempts in flight: read through the running executions of the
-- workspace alone.
create index executions_running_workspace on executions (workspace_id) where status = 'RUNNING';

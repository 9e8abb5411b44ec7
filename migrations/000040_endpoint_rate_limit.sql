-- An endpoint's rate limit (flow control): at most rate_limit_count starts per
-- rate_limit_period_ms, with bursts of up to rate_limit_burst, across every worker. A token
-- bucket per endpoint: `endpoint_rate_buckets` holds its tokens as of `refilled_at`; the claim
-- refills it for the time since, takes one token per execution it starts and writes it back, all
-- under the endpoint's transaction-scoped advisory lock (src/db/statements/claim.ts), so claims
-- on any number of workers spend one bucket, one after another.
alter table endpoints
  add column rate_limit_count integer,
  add column rate_limit_period_ms integer,
  add column rate_limit_burst integer,
  add constraint endpoints_rate_limit_check check (
    (rate_limit_count is null and rate_limit_period_ms is null and rate_limit_burst is null)
    or (rate_limit_count > 0 and rate_limit_period_ms > 0 and rate_limit_burst > 0));
comment on column endpoints.rate_limit_count is 'Rate limit: at most this many starts per rate_limit_period_ms (all three null: no limit).';
comment on column endpoints.rate_limit_period_ms is 'Rate limit: the period, in milliseconds.';
comment on column endpoints.rate_limit_burst is 'Rate limit: the most starts at once after a quiet spell (the bucket''s size).';

create table endpoint_rate_buckets (
  endpoint_id uuid primary key references endpoints (id) on delete cascade,
  tokens double precision not null,
  refilled_at timestamp with time zone not null
);
comment on table endpoint_rate_buckets is 'The token bucket of each rate-limited endpoint that has started work: its tokens as of refilled_at (database clock). No row: a full bucket.';

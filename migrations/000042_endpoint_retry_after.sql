-- A target's Retry-After slows its endpoint (flow control): when an HTTP target answers 429 or 503
-- with Retry-After, the attempt's completion (src/db/statements/complete.ts) records here until
-- when the target asked for no more requests, and every worker's claim starts none of the
-- endpoint's executions before then (src/db/statements/claim.ts). Attempts in flight finish. A
-- table of its own rather than a column of endpoints: the completion writes it while holding
-- locks on executions, and statements that lock an endpoint and then its executions (archiving
-- one) must never wait on it in a cycle; nor should an endpoint's row take a new version per 429.
create table endpoint_retry_after (
  endpoint_id uuid primary key references endpoints (id) on delete cascade,
  until timestamp with time zone not null,
  status_code integer not null check (status_code in (429, 503)),
  noted_at timestamp with time zone not null default now()
);
comment on table endpoint_retry_after is 'Until when each endpoint''s target asked for no more requests (HTTP 429 or 503 with Retry-After): none of its executions starts before then. Past rows are inert.';

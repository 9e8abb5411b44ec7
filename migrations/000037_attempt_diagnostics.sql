-- What an operator needs to diagnose one attempt, recorded with it by the worker that made it
-- (src/db/statements/complete.ts): the host and process id of that worker (its row in `workers`
-- is deleted when it stops, so the attempt keeps its own copy), and a handler error's stack,
-- redacted and capped like `error`. Null for attempts written by anyone else (the reconciler's
-- LEASE_EXPIRED rows) and for attempts from before this migration.
alter table attempts add column worker_host text;
comment on column attempts.worker_host is 'Host name of the worker that made the attempt; null when not recorded.';
alter table attempts add column worker_pid integer;
comment on column attempts.worker_pid is 'Process id of the worker that made the attempt, on worker_host; null when not recorded.';
alter table attempts add column error_stack text;
comment on column attempts.error_stack is 'HANDLER endpoints: the stack of the error the handler threw, redacted and capped; null otherwise.';

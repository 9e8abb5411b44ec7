-- Claim tokens: a worker can find what a claim took when the claim's answer never reached it.
--
-- A claim commits in the database and its answer travels back to the worker; a connection reset
-- in between (a restart, a cut link) leaves the executions RUNNING under a lease no worker knows
-- it holds, until the reconciler takes them when the lease expires and counts the attempt,
-- although no handler ran. Each claim now writes a token its worker made up (in the claim's own
-- UPDATE, no extra statement), so a worker whose claim failed on its connection asks the database
-- for what that token took and hands it back uncounted (src/db/queries/claim.ts).
--
-- No index: the question is asked only after a lost answer, of RUNNING executions, which the
-- partial index executions_running_endpoint already lists; an index on the token would cost
-- every claim a write.

alter table executions add column claim_token uuid;
comment on column executions.claim_token is
  'The token of the claim that last took the execution, made up by its worker: how the worker finds what a claim took whose answer it never received. Null for executions never claimed since migration 000031.';

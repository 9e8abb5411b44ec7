-- Searching executions by their error text (ExecutionFilter.errorContains): a trigram index, so
-- that `last_error ilike '%timeout%'` reads the index's few candidates rather than every row. A
-- btree can serve a prefix, never a substring, and an operator searches for the words in the
-- middle of an error ("connect ECONNREFUSED 10.0.0.7:443", "timeout after 30000 ms").
--
-- pg_trgm ships with PostgreSQL (contrib) and is a trusted extension since PostgreSQL 13: a role
-- that may create objects in the database may create it, no superuser needed. The embedded
-- Postgres ships it too. Only rows with an error are indexed: a succeeded execution has none.
create extension if not exists pg_trgm;

create index executions_last_error_trgm on executions using gin (last_error gin_trgm_ops) where last_error is not null;

-- Priorities (flow control): a job's priority, defaulting to its endpoint's, pinned on each of
-- its executions when it is created. Claims take higher priorities first and, within one
-- priority, the earliest due first; one claim in every few takes the earliest due whatever its
-- priority, so low priorities are never starved (src/db/statements/claim.ts).
--
-- The claim walks the priorities present among pending executions one level at a time (each an
-- exact range of executions_due_priority), so delayed work of a high priority never has to be
-- read past to reach due work of a lower one. executions_due stays for the oldest-first claims
-- and the due timer.
alter table endpoints add column default_priority smallint not null default 0
  constraint endpoints_default_priority_check check (default_priority between -100 and 100);
comment on column endpoints.default_priority is 'The priority of jobs created for this endpoint without one of their own (-100 to 100, higher first).';

alter table jobs add column priority smallint not null default 0
  constraint jobs_priority_check check (priority between -100 and 100);
comment on column jobs.priority is 'Higher first (-100 to 100); pinned on each execution when it is created.';

alter table executions add column priority smallint not null default 0
  constraint executions_priority_check check (priority between -100 and 100);
comment on column executions.priority is 'The job''s priority when this execution was created: claims take higher first.';

create index executions_due_priority on executions (priority desc, run_after, id) where status = 'PENDING';

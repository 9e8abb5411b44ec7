-- Live events are kept in partitions, one per generation, and a generation past every window is
-- detached and dropped whole instead of deleted row by row.
--
-- Deleting events row by row costs about 3 µs an event and competes with the engine that writes
-- them (three per execution): beside a drain of 5,000 executions a second the EVENTS slice's
-- twenty-fifth of a connection pruned about 7,600 a second while 15,000 were written
-- (docs/decisions/engine-cost-per-execution.md). Dropping a partition costs the same whatever it
-- holds.
--
-- Writers move to a generation a span (an hour or more) after its partition was attached: a
-- statement plans its inserts with the partitions there were when it began, so one that began
-- before the attach and wrote an event after the move failed with "no partition of relation events
-- found for row" (test/engine/event-partitions.test.ts).
--
-- Why generations, not days of created_at: a range of days must exist before the first row
-- arrives in it, or every write that makes an event fails, and a default partition to catch such
-- rows forbids DETACH ... CONCURRENTLY, the only detach that does not stop every writer while it
-- waits for the open transactions. A generation is the number the writers read when they insert,
-- and the pruner attaches the next generation's partition before it moves that number on
-- (src/service/retention/event-partitions.ts), so every row has a partition whether or not a
-- pruner ever runs; without one, events stay in the current generation.
--
-- Writers read the generation from the sequence `events_generation` with
-- pg_sequence_last_value(), the built-in the pg_sequences view reads: it sees a setval() at once,
-- without a transaction, and costs nothing measurable per row, where a function reading a table
-- cost about 4 µs a row (300,000 inserts: 0.59 s with either a constant or the sequence, 1.8 s
-- with a SQL function).
--
-- `event_generations` says when each generation began and ended being written: every row of an
-- ended generation was written by a transaction that began before its end, so once the end is
-- older than the longest events window in force, the whole partition is past every workspace's
-- window.

-- Only ever moved by setval(), which writes its exact value to the WAL: nextval() logs a value 32
-- ahead of the one it returns, so after a crash or on a promoted replica the writers would read a
-- generation with no partition yet.
create sequence events_generation minvalue 0 start 0;
select setval('events_generation', 0, true);

create table event_generations (
  gen integer primary key,
  -- When its partition was attached: writers move to a generation only a span after that, so
  -- no statement that began before the attach (its partitions read when it began) writes into it.
  attached_at timestamptz not null default now(),
  -- When writers moved to it (null: the spare, attached ahead).
  started_at timestamptz,
  -- When writers moved on from it (null: the current one, or the spare).
  ended_at timestamptz,
  -- Its events counted per workspace so far, a chunk of ids at a time, before it is retired:
  -- {"<workspace id>": {"n": count, "through": newest id}}, through id counted_through.
  counted jsonb not null default '{}',
  counted_through bigint,
  -- When the workspaces' replay horizons moved past its events and its removal was audited: only
  -- the detach and the drop are left.
  retired_at timestamptz
);
comment on table event_generations is 'The generations of live events (migration 000062): when each partition was attached, when writers began and stopped writing it, and how far its removal has got. Its partition is events_g<gen>.';

insert into event_generations (gen, attached_at, started_at) values (0, now(), now());

-- The table as it was becomes generation 0, with its rows, ids and indexes.
alter table events rename to events_g0;
alter table events_g0 add column gen integer not null default 0;
alter table events_g0 alter column gen drop default;
-- The old primary key on id alone gives way to the parent's (id, gen), built as the table is
-- attached.
alter table events_g0 drop constraint events_pkey;

-- The identity's sequence goes with the table's identity, so its position is carried over to the
-- new parent's by hand (alert cursors and the live hub read events_id_seq by name).
do $$
declare
  last bigint;
  called boolean;
begin
  select last_value, is_called into last, called from events_id_seq;
  alter table events_g0 alter column id drop identity;
  create table events (
    id bigint generated always as identity (sequence name events_id_seq),
    workspace_id uuid not null,
    topic text not null,
    subject_id uuid not null,
    job_id uuid,
    endpoint_id uuid,
    name text,
    status text not null,
    previous_status text,
    attempt_count integer,
    created_at timestamptz not null default now(),
    pause_kind text,
    gen integer not null default pg_sequence_last_value('events_generation'::regclass),
    constraint events_topic_check check (topic in ('EXECUTION', 'JOB', 'RUN', 'ALERT')),
    -- A unique index on a partitioned table holds its partition key; ids are unique by the identity.
    primary key (id, gen)
  ) partition by list (gen);
  perform setval('events_id_seq', last, called);
end $$;

comment on table events is 'Live events, the subscriptions'' replay log: partitioned by generation (migration 000062; event_generations), each pruned whole once past every window, and row by row for a workspace whose window is shorter.';

-- The replay and created_at indexes match the parent's and are adopted as they are.
alter index events_replay rename to events_g0_replay;
alter index events_created rename to events_g0_created;
create index events_replay on events (workspace_id, topic, id);
create index events_created on events using brin (created_at);
alter table events attach partition events_g0 for values in (0);

-- The spare: the next generation's partition, attached ahead.
create table events_g1 partition of events for values in (1);
insert into event_generations (gen) values (1);

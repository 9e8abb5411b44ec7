-- Jobs and executions get ids that grow with time: UUID version 7 (RFC 9562), 48 bits of Unix
-- milliseconds followed by random bits, instead of version 4's random bits throughout.
--
-- Every index keyed by a random id takes each new entry on a random leaf page. On a database
-- holding a month of history those pages are mostly not in shared buffers: each entry reads one,
-- dirties it, and after a checkpoint writes a full-page image of it to the WAL. Every execution
-- gets such entries at its insert, at its claim and at its completion (an update that changes its
-- status is not HOT: new entries in executions_pkey, in the unique (job_id, scheduled_for) and in
-- (job_id, created_at), plus its attempt's primary key (execution_id, attempt_number)). Measured
-- (`npm run bench -- engine-history`): with a million executions of history beside the drain, the
-- WAL per execution rose from 3,750 to 10,800 bytes. Ids that grow with time put the new entries
-- of each of these indexes on the few pages at the end of its newest range, which stay in memory.
--
-- Ids grow with time to the millisecond; within one they are in random order. Rows written before
-- this migration keep their ids (nothing is rewritten), and new ones land among them where their
-- first digits fall. Nothing relies on how ids sort against each other: they are compared for
-- equality, lock rows in one order, and break ties last in an order by time (created_at, id; the
-- claim's run_after, id, where occurrences due at the same instant now start in the order they
-- were written: the cron scheduler writes those in random order). An id now tells when its row was
-- made, which the API shows anyway (createdAt), and keeps 74 random bits (version 4 had 122):
-- still far beyond guessing, and no id is a credential (every read is checked against the
-- caller's workspace).
create function jobgate_uuid_v7() returns uuid language sql volatile parallel safe as $$
  -- A version 4 id with its first 48 bits replaced by the millisecond, and its version nibble
  -- turned from 0100 to 0111 (bits 52 and 53 of the bytes, counted from the first byte's lowest).
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
              placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
              from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;

alter table jobs alter column id set default jobgate_uuid_v7();
alter table executions alter column id set default jobgate_uuid_v7();

/**
 * createJob's one-statement path: the endpoints read under FOR SHARE, the jobs, their first
 * executions and their audit rows, written by one statement — one round trip and one commit
 * instead of seven round trips (begin, endpoint, clock, job, execution, audit, commit).
 *
 * It only ever inserts a job when no rule of createJob could refuse or change the outcome: the
 * caller (src/service/jobs/create.ts) sends only IMMEDIATE and DELAYED jobs without an idempotency
 * key or a lock key, from an actor whose role allows it, with input that parsed; the statement
 * itself inserts a request's job only when its endpoint exists, is live, is not INTERNAL (unless
 * the actor is jobgate itself) and has no payload spec to check the input against. Otherwise it
 * inserts nothing for that request and returns no row for it, and the service runs the full
 * transactional path, which raises the error or checks the spec. One statement is one
 * transaction: each job, its execution and its audit row commit together or not at all
 * (invariant 1), and the execution's insert trigger sends the work notification inside it.
 *
 * Many requests, one statement (`createJobBatcher`): a transaction that sends NOTIFY holds a
 * cluster-wide lock from its commit until its commit record is flushed, so such transactions
 * commit one at a time, one WAL flush each. Measured on a 2-core machine with fsync on: 5,400
 * single-row inserts/s, 360/s with a pg_notify beside each. Every createJob notifies (the work
 * wake-up, the live events), so one job per transaction capped createJob at about one WAL
 * flush per job. Requests that arrive while statements are in flight are written together by
 * the next one: one flush for all of them. An idle gateway sends each at once, alone.
 */
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import type { JobRow } from '../types.js';
import { isUuid, scoped, type Executor } from '../repositories/scope.js';

export interface OneStatementJob {
  workspaceId: string;
  endpoint: { id: string } | { name: string };
  /** Whether INTERNAL endpoints are allowed (the actor is jobgate itself). */
  system: boolean;
  name: string | null;
  kind: 'IMMEDIATE' | 'DELAYED';
  /** JSON text. */
  input: string;
  /** The job's own max attempts; null for the endpoint's, else `defaultMaxAttempts`. */
  maxAttempts: number | null;
  defaultMaxAttempts: number;
  /** DELAYED only; IMMEDIATE runs at the database's now(). */
  runAt: Date | null;
  /** The job's own priority; null for its endpoint's default. */
  priority: number | null;
  concurrencyKey: string | null;
  /** The open batch it joins as a member, counted into it (migration 000048); null for none. */
  batchId: string | null;
  /**
   * Whether the actor may add members to any batch of the workspace (an ADMIN, or jobgate
   * itself); otherwise only to one its own key created (`createdByKeyId`), as openBatchFor.
   */
  anyBatch: boolean;
  createdByKeyId: string | null;
  audit: { actorKind: string; actorKeyId: string | null; action: string; input: string };
}

// The batch parts of the statement (see `text`).
const OPEN_BATCH = `, open_batch as (
  -- The batches members join, locked as the full path's lockBatch does (after the endpoints):
  -- only an open one of the request's workspace takes a member, and a close waits for them. A
  -- batch another transaction holds (a worker counting a member, a close) is skipped, its
  -- requests declined to the full path, which waits for it: the other requests written by this
  -- statement, of any batch or none, never wait on it.
  select b.id, b.workspace_id, b.created_by_key_id from batches b
  where b.id = any($18::uuid[]) and b.workspace_id = any($1::uuid[]) and b.open
  order by b.id
  for update skip locked
)`;

const COUNTED = `, counted as (
  -- Members are counted into the batch's total as they are added, as addMember does.
  update batches b set total = b.total + n.members, updated_at = now()
  from (select batch_id, count(*)::int as members from job where batch_id is not null group by batch_id) n
  where b.id = n.batch_id
)`;

// One row per request, from parallel arrays: $1 workspace, $2 endpoint id (null: by name),
// $3 endpoint name, $4 system actor, $5 job name, $6 kind, $7 input, $8 max attempts,
// $9 default max attempts, $10 run at, $11 creating key, $12 actor kind, $13 actor key,
// $14 action, $15 audit input, $16 priority, $17 concurrency key, $18 batch, $19 whether the actor
// may join any batch. The output's `ord` is the request's place (1-based).
//
// Two texts: with the batches members join (`batches`), and without, for the requests that join
// none (nearly all). The batch parts cost a createJob of one job about a tenth of its statement
// even when they touch nothing: the lock pass, and the update's statement trigger, which fires
// for an update of no rows too. The text without them takes no batch parameter ($18 is not
// sent, nor $19), so it cannot write a member, counted or not. (A filter on the batch instead changed the
// planner's estimate of the requests, and with it the joins back to them: nested loops over
// 1,000 by 1,000 rows, a createJobs of 1,000 taking four times as long.)
const text = (batches: boolean) => `
with req as materialized (
  select r.*, jobgate_uuid_v7() as job_id
  from unnest($1::uuid[], $2::uuid[], $3::text[], $4::boolean[], $5::text[], $6::text[], $7::text[], $8::int[],
              $9::int[], $10::timestamptz[], $11::uuid[], $12::text[], $13::uuid[], $14::text[], $15::text[], $16::smallint[], $17::text[],
              ${batches ? '$18::uuid[], $19::boolean[]' : 'null::uuid[], null::boolean[]'})
    with ordinality as r(workspace_id, endpoint_id, endpoint_name, system, name, kind, input, max_attempts,
                         default_max_attempts, run_at, created_by_key_id, actor_kind, actor_key_id, action, audit_input, priority, concurrency_key,
                         batch_id, any_batch, ord)
), en as (
  -- FOR SHARE: an archive running now waits for these jobs, or these jobs see the archive.
  -- Only when no rule could refuse: live, no payload spec (and not INTERNAL, below).
  -- limited: of the version locked, as the gate trigger would read it (migrations 000044, 000057).
  select en.id, en.workspace_id, en.name, en.type, en.max_attempts, en.default_priority, jobgate_endpoint_limited(en) as limited
  from endpoints en
  where en.workspace_id = any($1::uuid[]) and (en.id = any($2::uuid[]) or en.name = any($3::text[]))
    and en.archived_at is null
    and en.payload_spec_id is null
  for share
)${batches ? OPEN_BATCH : ''}, target as (
  select req.*, en.id as target_endpoint_id, en.max_attempts as endpoint_max_attempts, en.default_priority, en.limited
  from req
  join en on en.workspace_id = req.workspace_id
    and (case when req.endpoint_id is not null then en.id = req.endpoint_id else en.name = req.endpoint_name end)
  ${batches ? 'left join open_batch b on b.id = req.batch_id and b.workspace_id = req.workspace_id' : ''}
  -- Not INTERNAL, unless jobgate itself asks; a member only of an open batch, and one its key
  -- created unless the actor may join any (else the full path refuses it, FORBIDDEN).
  where (en.type = 'USER' or req.system)${
    batches ? ' and (req.batch_id is null or (b.id is not null and (req.any_batch or b.created_by_key_id = req.created_by_key_id)))' : ''
  }
), job as (
  insert into jobs (id, workspace_id, endpoint_id, name, kind, input, max_attempts, priority, concurrency_key, run_at, created_by_key_id,
                    batch_id)
  select job_id, workspace_id, target_endpoint_id, name, kind, input::jsonb,
         coalesce(max_attempts, endpoint_max_attempts, default_max_attempts), coalesce(priority, default_priority), concurrency_key,
         run_at, created_by_key_id, batch_id
  from target
  returning *
), execution as (
  -- A member's end is counted into its batch (has_dependents, migration 000048). The gate flags
  -- are given, so the gate trigger does not read the endpoint and the job again for each row
  -- (migration 000057): gated from the endpoint locked above; not job_held, as the job is ACTIVE.
  insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, priority, concurrency_key,
                          created_by_key_id, input, has_dependents, gated, job_held)
  select job.workspace_id, job.id, job.endpoint_id, coalesce(job.run_at, now()), coalesce(job.run_at, now()), job.max_attempts, job.priority,
         coalesce(job.concurrency_key, ''), job.created_by_key_id, job.input, job.batch_id is not null, target.limited, false
  from job join target on target.job_id = job.id
)${batches ? COUNTED : ''}, audit as (
  insert into audit_log (workspace_id, actor_kind, actor_key_id, action, target_type, target_id, input, result_code)
  select target.workspace_id, target.actor_kind, target.actor_key_id, target.action, 'Job', job.id::text, target.audit_input::jsonb, 'OK'
  from job join target on target.job_id = job.id
)
select job.*, target.ord from job join target on target.job_id = job.id`;

const TEXT = { plain: text(false), batches: text(true) };
const NAME = { plain: 'jobgate.create-jobs', batches: 'jobgate.create-jobs/batches' };

type Row = JobRow & { ord: string };

/** The statement's parameters for `jobs`, as parallel arrays. */
function values(jobs: readonly OneStatementJob[]): unknown[][] {
  const col = <T>(f: (j: OneStatementJob) => T) => jobs.map(f);
  return [
    col((j) => scoped(j.workspaceId)),
    col((j) => ('id' in j.endpoint ? j.endpoint.id : null)),
    col((j) => ('name' in j.endpoint ? j.endpoint.name : null)),
    col((j) => j.system),
    col((j) => j.name),
    col((j) => j.kind),
    col((j) => j.input),
    col((j) => j.maxAttempts),
    col((j) => j.defaultMaxAttempts),
    col((j) => j.runAt),
    col((j) => j.createdByKeyId),
    col((j) => j.audit.actorKind),
    col((j) => j.audit.actorKeyId),
    col((j) => j.audit.action),
    col((j) => j.audit.input),
    col((j) => j.priority),
    col((j) => j.concurrencyKey),
    col((j) => j.batchId),
    col((j) => j.anyBatch),
  ];
}

/** Whether the statement can be asked for this job at all (a malformed id names no endpoint). */
function askable(j: OneStatementJob): boolean {
  return (!('id' in j.endpoint) || isUuid(j.endpoint.id)) && (j.batchId === null || isUuid(j.batchId));
}

/**
 * The jobs inserted, in the order asked: undefined for each one a rule sends down the full path
 * (see above). With `pool`, a named statement (parsed and planned once per connection: planning
 * was a third of the statement's server time); otherwise the same text through `db`.
 */
export async function insertJobsInOneStatement(
  db: Executor,
  pool: pg.Pool | undefined,
  jobs: readonly OneStatementJob[],
): Promise<(JobRow | undefined)[]> {
  const asked = jobs.filter(askable);
  const out: (JobRow | undefined)[] = jobs.map(() => undefined);
  if (asked.length === 0) return out;
  const kind = asked.some((j) => j.batchId !== null) ? 'batches' : 'plain';
  const params = kind === 'batches' ? values(asked) : values(asked).slice(0, -2);
  const { rows } = pool
    ? await pool.query<Row>({ name: NAME[kind], text: TEXT[kind], values: params })
    : await db.executeQuery<Row>(CompiledQuery.raw(TEXT[kind], params));
  const place = jobs.map((j, i) => (askable(j) ? i : -1)).filter((i) => i >= 0);
  for (const { ord, ...row } of rows) out[place[Number(ord) - 1]!] = row as JobRow;
  return out;
}

/** The job inserted, or undefined when a rule needs the full path (see above). */
export async function insertJobInOneStatement(db: Executor, pool: pg.Pool | undefined, j: OneStatementJob): Promise<JobRow | undefined> {
  return (await insertJobsInOneStatement(db, pool, [j]))[0];
}

/** At most this many statements of the batcher at once: more would only queue for the commit lock, holding pool connections. */
const IN_FLIGHT = 2;
/** At most this many jobs in one statement. */
const MAX_BATCH = 200;

interface Waiting {
  job: OneStatementJob;
  resolve(row: JobRow | undefined): void;
  reject(error: unknown): void;
}

export interface CreateJobBatcher {
  /** As insertJobInOneStatement, written together with the other requests waiting at the time. */
  insert(job: OneStatementJob): Promise<JobRow | undefined>;
}

/**
 * Writes concurrent one-statement createJobs together (see above). A statement the database
 * refuses (an error it answered, so nothing was committed) is retried one request at a time,
 * so each request gets exactly the outcome, row or error, it would have had alone. Any other
 * failure (the connection lost: whether the commit happened is unknown) is every request's
 * error, never retried.
 */
export function createJobBatcher(db: Executor, pool: pg.Pool): CreateJobBatcher {
  const queue: Waiting[] = [];
  let inFlight = 0;
  let scheduled = false;

  async function write(batch: Waiting[]): Promise<void> {
    try {
      const rows = await insertJobsInOneStatement(
        db,
        pool,
        batch.map((w) => w.job),
      );
      batch.forEach((w, i) => w.resolve(rows[i]));
    } catch (error) {
      if (batch.length === 1 || !(error instanceof pg.DatabaseError)) return batch.forEach((w) => w.reject(error));
      await Promise.all(batch.map((w) => insertJobInOneStatement(db, pool, w.job).then(w.resolve, w.reject)));
    }
  }

  function flush(): void {
    scheduled = false;
    while (inFlight < IN_FLIGHT && queue.length > 0) {
      inFlight++;
      void write(queue.splice(0, MAX_BATCH)).finally(() => {
        inFlight--;
        kick();
      });
    }
  }

  function kick(): void {
    if (scheduled || inFlight >= IN_FLIGHT || queue.length === 0) return;
    scheduled = true;
    // The requests that arrive in this turn of the event loop go together.
    setImmediate(flush);
  }

  return {
    insert(job) {
      return new Promise((resolve, reject) => {
        queue.push({ job, resolve, reject });
        kick();
      });
    },
  };
}

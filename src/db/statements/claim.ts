/**
 * Claiming due executions: the hot query of the engine.
 *
 * One statement claims a batch: candidates are selected with `FOR UPDATE SKIP LOCKED`
 * (concurrent workers never wait on, or take, each other's rows), each claimed execution gets a
 * new lease (owner, epoch + 1, expiry on the database clock) and its attempt count is
 * incremented at claim time — so an attempt lost to a crash has already counted.
 *
 * Only executions this worker can deliver are candidates: HTTP endpoints, and HANDLER
 * endpoints whose handler is registered in this process, of endpoints that are not paused.
 * Executions of jobs that are not ACTIVE wait, except a manual trigger of a paused job (an
 * operator's explicit "run it anyway"); a paused endpoint holds even those.
 *
 * Due work is taken highest priority first, the earliest due first within a priority; one claim in
 * every OLDEST_EVERY takes the earliest due whatever its priority, so none is starved (ClaimOrder).
 *
 * Endpoints with a limit (concurrency, rate, per key) are claimed separately, under a transaction-scoped
 * advisory lock per endpoint, through their executions' own indexes (their executions are gated,
 * migration 000044, so the unlimited claim never reads past them): the running count is read after the lock is taken and the lock
 * is held until the claimed rows commit as RUNNING, so two workers can never both fill the
 * same free slots. Endpoints without a limit (the common case) take the single-statement path.
 *
 * Each claim writes a token of its own on what it takes, in the same UPDATE: when the connection
 * fails after the claim was sent, its answer may be lost with a commit behind it, and the token
 * is how the worker finds what it took and hands it back uncounted (handBackLostClaims).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { workChannel } from '../channels.js';
import { transactionOn } from '../transaction.js';
import type { ConfigRow, EndpointRow, ExecutionRow } from '../types.js';
import { isConnectionError } from '../unavailable.js';

/**
 * A claimed execution as claimTail returns it: its own columns, its endpoint's target columns,
 * and what the statement joins or computes (declared here: the endpoint's name, its config's
 * entries, the cancel flag and the wait).
 */
export interface ClaimedExecution
  extends
    Pick<ExecutionRow, 'id' | 'workspace_id' | 'job_id' | 'endpoint_id' | 'lease_epoch' | 'attempt_count' | 'max_attempts' | 'input'>,
    Pick<EndpointRow, 'kind' | 'url' | 'method' | 'headers' | 'timeout_ms' | 'signing_secret' | 'handler_name'> {
  cancel_requested: boolean;
  /** A QUEUE cron job's occurrence: its outcome's record gives the job's next one its turn. */
  serial: ExecutionRow['serial'];
  endpoint_name: EndpointRow['name'];
  config_entries: ConfigRow['entries'] | null;
  /** Seconds from when it became due (run_after) to this claim, on the database's clock (for metrics). */
  waited_s: number;
}

// Shared by both claim paths: take the leases, count the attempts and return what delivery needs
// (job input, endpoint target, config for templating) in one trip. The attempt in progress is
// the claimed row itself (attempt_count, lease_epoch, lease_owner, attempt_started_at); its
// attempts row is written when it ends (migration 000013). The candidates carry only their id:
// an UPDATE ... FROM keeps a whole-row copy of each joined row for its concurrent-update
// recheck, so wide candidate rows (job input, endpoint headers) were copied for nothing; the
// job and endpoint are read again, by primary key, for the rows actually claimed.
// Parameters: $1 the worker id (lease owner), $2 the lease in milliseconds, $3 the claim's token
// (written with the lease, in the same UPDATE: see handBackLostClaims).
const claimTail = (after = '') => `), claimed as (
  update executions e
  set status = 'RUNNING',
      lease_owner = $1,
      lease_epoch = e.lease_epoch + 1,
      lease_expires_at = now() + make_interval(secs => $2::double precision / 1000),
      attempt_count = e.attempt_count + 1,
      attempt_started_at = now(),
      claim_token = $3::uuid,
      updated_at = now()
  from candidates c
  where e.id = c.id
  returning e.id, e.workspace_id, e.job_id, e.endpoint_id, e.lease_epoch, e.attempt_count, e.max_attempts,
            e.cancel_requested_at is not null as cancel_requested, e.serial, e.input, e.priority, e.run_after,
            extract(epoch from now() - e.run_after)::float8 as waited_s
)${after}
select cl.id, cl.workspace_id, cl.job_id, cl.endpoint_id, cl.lease_epoch, cl.attempt_count, cl.max_attempts,
       -- The execution's pinned input (migration 000018); the job's only for an execution that had
       -- finished before pinning and was re-driven since.
       cl.cancel_requested, cl.serial, coalesce(cl.input, j.input) as input, en.name as endpoint_name, en.kind, en.url, en.method, en.headers,
       en.timeout_ms, en.signing_secret, en.handler_name, cf.entries as config_entries, cl.waited_s
from claimed cl
join jobs j on j.id = cl.job_id
join endpoints en on en.id = cl.endpoint_id
left join configs cf on cf.id = en.config_id
-- The worker starts them in this order: the claim's own (ClaimOrder's PRIORITY; an OLDEST claim
-- took the earliest due, and starts the highest of those first).
order by cl.priority desc, cl.run_after, cl.id`;

/**
 * Claimable, the one definition every claim path uses (the execution is `e`, its job `j`): due,
 * PENDING, of a job that runs. A paused job's executions wait, but for a manual trigger (an
 * operator's explicit "run it anyway").
 */
export const CLAIMABLE = `e.status = 'PENDING'
    and e.run_after <= now()
    and (j.status = 'ACTIVE' or (j.status = 'PAUSED' and e.trigger = 'MANUAL'))`;

/**
 * Endpoint `en` may start executions now: not paused (pauseEndpoint), and its target has not asked
 * for a pause with a Retry-After that has not run out (endpoint_retry_after, written by complete.ts).
 */
export const STARTS_ALLOWED = (en: string) =>
  `(${en}.paused_at is null and not exists (select 1 from endpoint_retry_after ra where ra.endpoint_id = ${en}.id and ra.until > now()))`;

/**
 * Deliverable by this worker now (the endpoint is `en`; `handlers` the parameter of its handler
 * names): an endpoint it can deliver to, that may start executions now.
 */
const DELIVERABLE = (handlers: string) => `((en.kind = 'HTTP' or en.handler_name = any(${handlers}::text[])) and ${STARTS_ALLOWED('en')})`;

// Serial executions (a QUEUE cron job's occurrences) run one at a time, in occurrence order:
// one is a candidate only while none of its job runs and no earlier one of its job is pending.
// Within one statement only the earliest qualifies; a concurrent claim sees the earliest still
// PENDING (its RUNNING is not committed yet) and so takes none of that job's.
export const SERIAL_TURN = `(not e.serial or (
      not exists (select 1 from executions r where r.job_id = e.job_id and r.status = 'RUNNING')
      and not exists (select 1 from executions p where p.job_id = e.job_id and p.status = 'PENDING' and p.serial
                      and (p.scheduled_for, p.id) < (e.scheduled_for, e.id))))`;

/**
 * The priorities present among the pending executions `among` picks (`levels.p`), one row each,
 * the last row null: the ungated ones (executions_due_priority) or a limited endpoint's
 * (executions_gated_due). A skip scan: each row is one probe of that index, for the lowest priority
 * above the previous one. Enumerated from the lowest up, though claims take the highest first (the claim
 * sorts the few rows): the probes then land at the end of each priority's range, among its latest
 * executions, instead of at its start, where the executions claimed since the last vacuum leave
 * dead index entries that each probe would step over again. The claim then reads each level in
 * due order; walking the index in (priority desc, run_after) order instead would read every
 * delayed execution of a high priority before reaching the due ones of the next.
 */
const priorityLevels = (among: string) => `levels(p) as (
  (select e.priority from executions e where e.status = 'PENDING' and ${among} order by e.priority limit 1)
  union all
  select (select e.priority from executions e where e.status = 'PENDING' and ${among} and e.priority > l.p order by e.priority limit 1)
  from levels l where l.p is not null
)`;

/**
 * Candidates in due order whatever their priority (an OLDEST claim), merged from each level's
 * earliest: `level(lvl)` is a level's candidate query, in due order and limited, that locks
 * nothing. The few picked are then locked, with their state checked again on the locked version.
 */
const oldestAcrossLevels = (limit: string, level: (lvl: string) => string, gated: boolean) => `picked as (
  select c.id from levels l cross join lateral (${level('l.p')}) c
  where l.p is not null
  order by c.run_after, c.id
  limit ${limit}
), candidates as (
  select e.id from executions e join picked p on p.id = e.id
  where e.status = 'PENDING' and e.run_after <= now() and ${gated ? '' : 'not '}e.gated
  for update of e skip locked`;

/**
 * Which order a claim takes due work in. PRIORITY: highest priority first, earliest due first
 * within one. OLDEST: earliest due first, whatever the priority: the worker makes one claim in
 * every OLDEST_EVERY this way, which is how a low priority is never starved (claimOrder).
 */
export type ClaimOrder = 'PRIORITY' | 'OLDEST';

/** One claim in this many takes the oldest due work first (see ClaimOrder). */
export const OLDEST_EVERY = 10;

/**
 * The order of a worker's `n`th claim (counted from 0): OLDEST for one in every OLDEST_EVERY.
 * So while work is due, at least one claim in OLDEST_EVERY, on every worker, starts the earliest
 * due executions it may: an execution waits behind at most OLDEST_EVERY claims for each claim's
 * worth of executions due before it, whatever priorities keep arriving.
 */
export const claimOrder = (n: number): ClaimOrder => (n % OLDEST_EVERY === OLDEST_EVERY - 1 ? 'OLDEST' : 'PRIORITY');

// $4 the handlers this worker has; the LIMIT is a parameter ($5) or a constant (see below).
// Candidates of one priority level (`lvl`) in due order, locked or (to be merged, see
// oldestAcrossLevels) not. Ungated executions only (migration 000044: those of the endpoints
// without limits), and the endpoint's limits checked too, by jobgate_endpoint_limited: the one
// definition of a limited endpoint, which the triggers that keep the flag use as well.
const unlimitedCandidates = (limit: string, lvl: string, lock: boolean) => `
  select e.id, e.run_after
  from executions e
  join jobs j on j.id = e.job_id
  join endpoints en on en.id = e.endpoint_id
  where ${CLAIMABLE}
    and not e.gated
    and e.priority = ${lvl}
    and ${SERIAL_TURN}
    and not jobgate_endpoint_limited(en)
    and ${DELIVERABLE('$4')}
  order by e.run_after, e.id
  limit ${limit}
  ${lock ? 'for update of e skip locked' : ''}`;

const claimUnlimitedSql = (limit: string, order: ClaimOrder) =>
  order === 'OLDEST'
    ? `
with recursive ${priorityLevels('not e.gated')}, ${oldestAcrossLevels(limit, (lvl) => unlimitedCandidates(limit, lvl, false), false)}
${claimTail()}`
    : `
with recursive ${priorityLevels('not e.gated')}, candidates as (
  select c.id from (select p from levels where p is not null order by p desc) l cross join lateral (${unlimitedCandidates(limit, 'l.p', true)}) c
  limit ${limit}
${claimTail()}`;

/**
 * The whole and partial tokens in endpoint `en`'s bucket `b` now: its tokens when last written
 * (none written: a full bucket), refilled at count per period for the time since, capped at the
 * burst. The one formula the claim, the due timer and waitingFor read.
 */
export const tokensNow = (en: string, b: string) =>
  `least(${en}.rate_limit_burst::float8, coalesce(${b}.tokens, ${en}.rate_limit_burst)
         + coalesce(greatest(0, extract(epoch from clock_timestamp() - ${b}.refilled_at) * 1000), 0)
           * ${en}.rate_limit_count / ${en}.rate_limit_period_ms)`;

/**
 * Limited endpoints (a concurrency or a rate limit) with due work whose advisory lock this transaction could take.
 * It also turns JIT compilation off for the rest of the transaction, before the limited claims
 * that follow are planned: their LIMIT is the room counted after the lock (an expression), for
 * which the planner assumes a tenth of the table, so on a server with JIT on (Postgres' default)
 * a claim that runs in a millisecond was compiled first, for 600 ms, every time.
 */
const LOCK_LIMITED = `
select en.id, en.concurrency_limit, en.key_concurrency_limit,
       (select count(*) from executions r where r.endpoint_id = en.id and r.status = 'RUNNING')::int as running
from endpoints en
left join endpoint_rate_buckets b on b.endpoint_id = en.id
cross join (select set_config('jit', 'off', true)) jit_off
where jobgate_endpoint_limited(en)
  -- The lock last (a CASE, whose order the planner keeps: it evaluates cheap conditions of a WHERE
  -- first, and would take locks of endpoints it then leaves out). A bucket short of a whole token
  -- is left alone: read in this statement's snapshot, from before the lock, it can only show more
  -- tokens than the claim would (spends it has not seen), never fewer.
  and case when ${DELIVERABLE('$1')}
             and (en.rate_limit_count is null or ${tokensNow('en', 'b')} >= 1)
             and exists (select 1 from executions e join jobs j on j.id = e.job_id
                         where e.endpoint_id = en.id and e.gated and ${CLAIMABLE})
           then pg_try_advisory_xact_lock(714302051, hashtext(en.id::text))
           else false end`;

/**
 * The limited claims' first parts ($4 the endpoint, $5 the most this claim may take, $6 the
 * endpoint's concurrency limit: null for none, which least() ignores). `bucket`: a rate-limited
 * endpoint's bucket, refilled for the time since it was last written (no row: a full bucket; no
 * rate limit: no bucket), on clock_timestamp(), not now(): now() is when this transaction began,
 * which may be before the previous holder of the advisory lock wrote the bucket, and would run
 * its clock backwards. `room`: how many the claim may start, counted once: its free slots and its
 * whole tokens. Both are read in this statement's snapshot, taken after the advisory lock was
 * granted (LOCK_LIMITED is a statement before it): the bucket the previous holder wrote and the
 * claims it committed are seen.
 */
const BUCKET_AND_ROOM = `bucket as materialized (
  select ${tokensNow('en', 'b')} as tokens, clock_timestamp() as at
  from endpoints en left join endpoint_rate_buckets b on b.endpoint_id = en.id
  where en.id = $4 and en.rate_limit_count is not null
), room as materialized (
  select greatest(0, least($5::int,
                           $6::int - (select count(*) from executions r where r.endpoint_id = $4 and r.status = 'RUNNING')::int,
                           (select floor(bk.tokens)::int from bucket bk))) as n
)`;

/**
 * Spends what the claim took from the bucket, in the same statement, still under the endpoint's
 * advisory lock: its tokens as of `at`, less one per execution claimed (nothing claimed: not
 * written, as the bucket refills on its own).
 */
const SPEND_TOKENS = `, spent as (
  insert into endpoint_rate_buckets (endpoint_id, tokens, refilled_at)
  select $4, bk.tokens - (select count(*) from claimed), bk.at from bucket bk
  where exists (select 1 from claimed)
  on conflict (endpoint_id) do update set tokens = excluded.tokens, refilled_at = excluded.refilled_at
)`;

// The endpoint's gated executions (all of its pending ones: it has a limit), one priority level's
// in due order (executions_gated_due), locked or not (as unlimitedCandidates).
const limitedCandidates = (lvl: string, lock: boolean) => `
  select e.id, e.run_after
  from executions e
  join jobs j on j.id = e.job_id
  join endpoints en on en.id = e.endpoint_id
  where ${CLAIMABLE}
    and e.endpoint_id = $4
    and e.gated
    and e.priority = ${lvl}
    and ${SERIAL_TURN}
    and ${STARTS_ALLOWED('en')}
  order by e.run_after, e.id
  limit (select n from room)
  ${lock ? 'for update of e skip locked' : ''}`;
const ENDPOINT_LEVELS = priorityLevels('e.endpoint_id = $4 and e.gated');
const CLAIM_LIMITED: Record<ClaimOrder, string> = {
  OLDEST: `
with recursive ${ENDPOINT_LEVELS}, ${BUCKET_AND_ROOM}, ${oldestAcrossLevels('(select n from room)', (lvl) => limitedCandidates(lvl, false), true)}
${claimTail(SPEND_TOKENS)}`,
  PRIORITY: `
with recursive ${ENDPOINT_LEVELS}, ${BUCKET_AND_ROOM}, candidates as (
  select c.id from (select p from levels where p is not null order by p desc) l cross join lateral (${limitedCandidates('l.p', true)}) c
  limit (select n from room)
${claimTail(SPEND_TOKENS)}`,
};

/** The most keys one keyed claim's window looks at; the rotation carries on from there. */
const MAX_KEY_LANES = 100;

/** The first key `op` `than` among the endpoint's pending executions (one probe of executions_pending_key). */
const nextKey = (op: '>' | '>=', than: string) => `(select e.concurrency_key from executions e
     where e.endpoint_id = $4 and e.status = 'PENDING' and e.gated and e.concurrency_key ${op} ${than}
     order by e.concurrency_key limit 1)`;

/**
 * A keyed endpoint's claim (it has a key_concurrency_limit), under its advisory lock: the keys
 * with pending work take turns. The lanes are the endpoint's distinct concurrency keys ('' is the
 * lane of executions without one) in key order from just after the rotation's cursor (read from
 * endpoint_key_turns in the statement when $9, else $7; null:
 * from the start), wrapping round to the start, twice as many as the claim has room for (at least
 * 8, at most MAX_KEY_LANES), each found by one probe of executions_pending_key. Each lane offers its due work in priority and due order, as
 * much as its key has room for ($8, the per-key limit, less its attempts in flight; the keyless
 * lane is not limited per key) and no more than its share of the claim's room; the claim takes
 * every lane's first, then every lane's second, and so on (turn, then position), up to the
 * endpoint's room. The cursor moves to the lane of the last one taken, or, when the claim had
 * room and took nothing, past every lane it looked at: the next claim starts after it, so a key
 * with a long backlog gets one turn per round like any other, and keys past the window are
 * reached too. Rows are locked with their state checked again on the locked version: a cancel
 * or a reschedule that committed meanwhile leaves them alone.
 */
const CLAIM_KEYED = `
with recursive turn_from(k) as (
  select case when $9::boolean then (select t.last_key from endpoint_key_turns t where t.endpoint_id = $4) else $7::text end
), after_cursor(k, n) as (
  select ${nextKey('>', '(select k from turn_from)')}, 1
  union all
  select ${nextKey('>', 'a.k')}, a.n + 1 from after_cursor a where a.k is not null and a.n < ${MAX_KEY_LANES}
), from_start(k, n) as (
  select ${nextKey('>=', "''")}, 1
  union all
  select ${nextKey('>', 'f.k')}, f.n + 1 from from_start f
  where f.k is not null and f.n < ${MAX_KEY_LANES} and ((select k from turn_from) is null or f.k < (select k from turn_from))
), ${BUCKET_AND_ROOM}, lanes as materialized (
  -- As many as the claim is likely to need (twice its room, at least 8), read lazily: the keys
  -- after the cursor come first, and the round starts over only when they run out (up to and
  -- including the cursor's own key; positions after the first part's).
  select k, n from after_cursor where k is not null
  union all
  select f.k, f.n + ${MAX_KEY_LANES} from from_start f
  where f.k is not null and ((select k from turn_from) is null or f.k <= (select k from turn_from))
  limit least(${MAX_KEY_LANES}, greatest(8, 2 * (select n from room)))
), running as materialized (
  select r.concurrency_key as k, count(*)::int as n from executions r
  where r.endpoint_id = $4 and r.status = 'RUNNING' group by 1
), picked as (
  select c.id, c.turn, l.n as position, l.k
  from lanes l
  cross join lateral (
    select e.id, row_number() over (order by e.priority desc, e.run_after, e.id) as turn
    from executions e
    join jobs j on j.id = e.job_id
    where e.endpoint_id = $4 and e.concurrency_key = l.k and e.gated and ${CLAIMABLE} and ${SERIAL_TURN}
    order by e.priority desc, e.run_after, e.id
    limit least(
      -- Its share of the room, so a claim reads about as many rows as it may take.
      ceil((select n from room)::numeric / greatest(1, (select count(*) from lanes)))::int,
      case when l.k = '' then (select n from room)
           else greatest(0, $8::int - coalesce((select r.n from running r where r.k = l.k), 0)) end)
  ) c
), candidates as (
  select e.id, p.turn, p.position, p.k
  from executions e
  join (select id, turn, position, k from picked order by turn, position limit (select n from room)) p on p.id = e.id
  where e.status = 'PENDING' and e.run_after <= now() and e.gated
  for update of e skip locked
), turned as (
  insert into endpoint_key_turns (endpoint_id, last_key)
  select $4, coalesce((select c.k from candidates c order by c.turn desc, c.position desc limit 1),
                      (select l.k from lanes l order by l.n desc limit 1))
  where (select n from room) > 0 and exists (select 1 from lanes)
  on conflict (endpoint_id) do update set last_key = excluded.last_key
${claimTail(SPEND_TOKENS)}`;

export interface ClaimOptions {
  workerId: string;
  limit: number;
  handlers: string[];
  leaseMs: number;
  /** Whether any endpoint has a concurrency limit; skips the limited path when none does. */
  limitedEndpoints: boolean;
  /** The claim's token (a uuid), written on what it takes; a fresh one unless given. */
  token?: string;
  /** Which due work first (see ClaimOrder); PRIORITY unless given. */
  order?: ClaimOrder;
}

/**
 * The claim was sent and its connection failed before the answer arrived: the database may have
 * committed it, and then holds executions RUNNING under leases of this worker that it never
 * learnt of. `token` finds them (handBackLostClaims). A failure to get a connection at all is
 * not this: nothing was sent. The connection's error is the `cause` (what availability checks).
 */
export class ClaimAnswerLost extends Error {
  constructor(
    readonly token: string,
    cause: unknown,
  ) {
    super(`the claim's answer was lost: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ClaimAnswerLost';
  }
}

// Named statements: each connection parses and plans them once. A LIMIT given as a parameter
// makes Postgres plan for an unknown row count (10% of the table) — a hash join over all
// executions — so it keeps re-planning on every call to get the index walk. Every claim size
// therefore gets its own statement with the LIMIT written in, whose cached plan is the index
// walk in (run_after, id) order stopped by the LIMIT. Claims are sized to a worker's free slots,
// so sizes other than the batch size are common: when only the usual size had a fixed statement,
// re-planning the others was ~10% of the database's CPU on the engine benchmark. Sizes are
// bounded by the batch size, so a connection holds at most that many plans per order; a size past
// MAX_FIXED (a one-off drain) is planned each time.
const MAX_FIXED = 1000;
const CLAIM_ANY_SIZE: Record<ClaimOrder, string> = {
  PRIORITY: claimUnlimitedSql('$5', 'PRIORITY'),
  OLDEST: claimUnlimitedSql('$5', 'OLDEST'),
};
const fixedSize = new Map<string, string>();

function claimUnlimited(o: ClaimOptions, token: string): pg.QueryConfig {
  const order = o.order ?? 'PRIORITY';
  const values: unknown[] = [o.workerId, o.leaseMs, token, o.handlers];
  const suffix = order === 'OLDEST' ? '/oldest' : '';
  if (Number.isInteger(o.limit) && o.limit > 0 && o.limit <= MAX_FIXED) {
    const name = `jobgate.claim/${o.limit}${suffix}`;
    let text = fixedSize.get(name);
    if (!text) fixedSize.set(name, (text = claimUnlimitedSql(String(o.limit), order)));
    return { name, text, values };
  }
  return { name: `jobgate.claim${suffix}`, text: CLAIM_ANY_SIZE[order], values: [...values, o.limit] };
}

/**
 * Claims up to `o.limit` due executions for `o.workerId` (see the file's comment). Throws
 * ClaimAnswerLost when the connection failed after the claim was sent; any other error means
 * nothing was claimed.
 */
export async function claimExecutions(pool: pg.Pool, o: ClaimOptions): Promise<ClaimedExecution[]> {
  const token = o.token ?? randomUUID();
  // The connection is taken apart from the statement (as pool.query does inside, so no extra
  // trip) to tell a claim never sent from one whose answer was lost.
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    if (!o.limitedEndpoints) return (await client.query<ClaimedExecution>(claimUnlimited(o, token))).rows;
    return await transactionOn(client, () => claimWithLimits(client, o, token));
  } catch (error) {
    failed = error as Error;
    // A statement the server refused (a conflict, a cancel) rolled back; a lost connection may
    // have taken the answer of a commit with it.
    throw isConnectionError(error) ? new ClaimAnswerLost(token, error) : error;
  } finally {
    // Dropped after any error, as pool.query does.
    client.release(failed);
  }
}

/**
 * A claim when some endpoint has limits: the unlimited endpoints' statement, then each limited
 * endpoint whose lock this transaction can take, while there is room. An OLDEST claim (one in
 * OLDEST_EVERY) serves the limited endpoints first, so a steady backlog on unlimited endpoints
 * cannot keep them from ever starting.
 */
async function claimWithLimits(client: pg.PoolClient, o: ClaimOptions, token: string): Promise<ClaimedExecution[]> {
  if (o.order !== 'OLDEST') {
    const rows = (await client.query<ClaimedExecution>(claimUnlimited(o, token))).rows;
    return o.limit - rows.length > 0 ? [...rows, ...(await claimLimited(client, o, token, o.limit - rows.length))] : rows;
  }
  const rows = await claimLimited(client, o, token, o.limit);
  if (o.limit - rows.length <= 0) return rows;
  return [...rows, ...(await client.query<ClaimedExecution>(claimUnlimited({ ...o, limit: o.limit - rows.length }, token))).rows];
}

/** Up to `room` executions of the limited endpoints, each under its advisory lock. */
async function claimLimited(client: pg.PoolClient, o: ClaimOptions, token: string, room: number): Promise<ClaimedExecution[]> {
  const rows: ClaimedExecution[] = [];
  const limited = await client.query<{
    id: string;
    concurrency_limit: number | null;
    key_concurrency_limit: number | null;
    running: number;
  }>({
    name: 'jobgate.lock-limited',
    text: LOCK_LIMITED,
    values: [o.handlers],
  });
  for (const ep of limited.rows) {
    // A first estimate; the claim recounts after the lock (the count here may be stale), and
    // reads and spends the bucket of a rate-limited endpoint in the same statement.
    const free = ep.concurrency_limit === null ? room : Math.min(room, ep.concurrency_limit - ep.running);
    if (free <= 0) continue;
    const order = o.order ?? 'PRIORITY';
    const more =
      ep.key_concurrency_limit === null
        ? (
            await client.query<ClaimedExecution>({
              name: order === 'OLDEST' ? 'jobgate.claim-limited/oldest' : 'jobgate.claim-limited',
              text: CLAIM_LIMITED[order],
              values: [o.workerId, o.leaseMs, token, ep.id, free, ep.concurrency_limit],
            })
          ).rows
        : await claimKeyed(client, o, token, {
            id: ep.id,
            free,
            concurrencyLimit: ep.concurrency_limit,
            keyLimit: ep.key_concurrency_limit,
          });
    rows.push(...more);
    room -= more.length;
    if (room <= 0) break;
  }
  return rows;
}

/** Windows of keys one keyed claim looks through, at most, when those before found nothing. */
const MAX_KEY_WINDOWS = 10;

/**
 * A keyed endpoint's claim (CLAIM_KEYED), from where its rotation stands (read by the claim
 * itself). A window that found nothing to start moved the cursor past its keys: the next window is
 * looked at at once (up to MAX_KEY_WINDOWS), rather than after the worker's next poll; from then
 * on the cursor is read here, to stop when a window no longer moves it.
 */
async function claimKeyed(
  client: pg.PoolClient,
  o: ClaimOptions,
  token: string,
  ep: { id: string; free: number; concurrencyLimit: number | null; keyLimit: number },
): Promise<ClaimedExecution[]> {
  const cursorNow = async () =>
    (await client.query<{ last_key: string }>({ name: 'jobgate.key-turn', text: KEY_TURN, values: [ep.id] })).rows[0]?.last_key ?? null;
  // undefined: the claim reads the cursor itself (the first window, and most claims' only one).
  let cursor: string | null | undefined;
  for (let window = 1; ; window++) {
    const { rows } = await client.query<ClaimedExecution>({
      name: 'jobgate.claim-keyed',
      text: CLAIM_KEYED,
      values: [o.workerId, o.leaseMs, token, ep.id, ep.free, ep.concurrencyLimit, cursor ?? null, ep.keyLimit, cursor === undefined],
    });
    if (rows.length > 0 || window >= MAX_KEY_WINDOWS) return rows;
    const moved = await cursorNow();
    if (moved === cursor) return rows;
    cursor = moved;
  }
}

const KEY_TURN = 'select last_key from endpoint_key_turns where endpoint_id = $1';

/**
 * Hands back what claims whose answer was lost took: the executions still RUNNING under one of
 * `tokens` and leased to `workerId`. Nobody ran them: their worker never learnt it held them, and
 * a lease taken over since (reconciled, claimed again) carries another token or status and is
 * not touched. Each goes back as it was before the claim: PENDING, its attempt count given back,
 * its run_after kept (due, in its place in the queue); CANCELLED instead when a cancellation was
 * asked for meanwhile (its job may be retired, and a PENDING execution of a retired job would
 * wait for good). Its epoch moves on, so nothing carrying the lost claim's epoch is ever
 * recorded. The planner reads the RUNNING executions through their partial index
 * (executions_running_endpoint): no index on the token, which every claim would have to write.
 */
const HAND_BACK_LOST = `
with locked as materialized (
  -- In id order, as every statement that locks several executions (see lease.ts).
  select e.id from executions e
  where e.status = 'RUNNING' and e.lease_owner = $1 and e.claim_token = any($2::uuid[])
  order by e.id
  for no key update
)
update executions e
set status = case when e.cancel_requested_at is null then 'PENDING' else 'CANCELLED' end,
    finished_at = case when e.cancel_requested_at is null then e.finished_at else now() end,
    last_error = case when e.cancel_requested_at is null then e.last_error else 'cancelled before its attempt started' end,
    lease_owner = null,
    lease_expires_at = null,
    lease_epoch = e.lease_epoch + 1,
    attempt_count = e.attempt_count - 1,
    updated_at = now()
from locked l
where e.id = l.id and e.status = 'RUNNING' and e.lease_owner = $1 and e.claim_token = any($2::uuid[])
returning e.id, e.status, e.claim_token as token`;

export async function handBackLostClaims(
  pool: pg.Pool,
  workerId: string,
  tokens: string[],
): Promise<{ id: string; status: 'PENDING' | 'CANCELLED'; token: string }[]> {
  if (tokens.length === 0) return [];
  const { rows } = await pool.query<{ id: string; status: 'PENDING' | 'CANCELLED'; token: string }>(HAND_BACK_LOST, [workerId, tokens]);
  // Other workers may have room for them now (this one claims again right after).
  if (rows.some((r) => r.status === 'PENDING'))
    await pool.query('select pg_notify($1, $2)', [workChannel.name, workChannel.encode({ kind: 'work' })]);
  return rows;
}

/** Whether any endpoint has a concurrency or a rate limit; the claim path is simpler when none does. */
export async function anyLimitedEndpoint(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query(
    `select exists (select 1 from endpoints
                    where jobgate_endpoint_limited(endpoints)
                      and archived_at is null) as any`,
  );
  return rows[0].any as boolean;
}

/** The longest timeout any endpoint has (ms), null when none sets one: a lease without heartbeats must outlast it. */
export async function longestEndpointTimeoutMs(pool: pg.Pool): Promise<number | null> {
  const { rows } = await pool.query<{ max: number | null }>('select max(timeout_ms) as max from endpoints');
  return rows[0]?.max ?? null;
}

/**
 * In how many milliseconds the next pending execution becomes due, if any: the worker sets a
 * timer for it. A duration on the database's clock, not a time: the claim compares run_after
 * with the database's now(), so a timer set from a host clock ahead of it fired before the
 * execution was due, the claim found nothing, and the worker looked and claimed again at once,
 * in a loop, for as long as the clocks disagree.
 */
export async function nextDueInMs(pool: pg.Pool): Promise<number | null> {
  // Only future work: past-due rows this worker cannot deliver (paused job, a handler it lacks)
  // would otherwise wake it in a loop.
  // Named: an idle worker runs this after every short claim; planning it each time cost more
  // than running it.
  // Also the next token of a rate-limited endpoint that has run dry with due work waiting: the
  // claim leaves that work for later, and nothing else wakes the worker when the token comes.
  // Only a bucket short of a whole token counts (one with a token is claimable now, or held by
  // something else that wakes the worker), or the worker would wake in a loop.
  // And the end of a target's Retry-After, which held its endpoint's due work (at most one wake
  // for each, whether or not work waits: cheaper than finding out).
  const { rows } = await pool.query({
    name: 'jobgate.next-due',
    text: `select least(
             (select extract(epoch from min(run_after) - now()) * 1000
              from executions where status = 'PENDING' and run_after > now()),
             (select min((1 - t.tokens) * en.rate_limit_period_ms / en.rate_limit_count)
              from endpoints en
              join endpoint_rate_buckets b on b.endpoint_id = en.id
              cross join lateral (select ${tokensNow('en', 'b')} as tokens) t
              where en.rate_limit_count is not null and t.tokens < 1
                and exists (select 1 from executions e where e.endpoint_id = en.id and e.status = 'PENDING' and e.gated and e.run_after <= now())),
             (select extract(epoch from min(ra.until) - now()) * 1000 from endpoint_retry_after ra where ra.until > now())
           ) as in_ms`,
  });
  const inMs = rows[0]?.in_ms as string | number | null | undefined;
  return inMs == null ? null : Number(inMs);
}

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
 * Endpoints with a limit (concurrency, rate, per key, a workspace's cap) are claimed separately
 * (claim-limited.ts), under a transaction-scoped advisory lock per endpoint, through their
 * executions' own indexes (their executions are gated, migration 000044, so the unlimited claim
 * never reads past them). Endpoints without a limit (the common case) take the single-statement
 * path here. The parts both paths share are in claim-gates.ts.
 *
 * Each claim writes a token of its own on what it takes, in the same UPDATE: when the connection
 * fails after the claim was sent, its answer may be lost with a commit behind it, and the token
 * is how the worker finds what it took and hands it back uncounted (handBackLostClaims).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { workChannel } from '../channels.js';
import { transactionOn } from '../transaction.js';
import { isConnectionError } from '../unavailable.js';
import {
  claimTail,
  DELIVERABLE,
  oldestAcrossLevels,
  priorityLevels,
  SERIAL_TURN,
  tokensNow,
  type ClaimedExecution,
  type ClaimOptions,
  type ClaimOrder,
} from './claim-gates.js';
import { awaitEndpointLock, claimEndpointOnce, claimLimited } from './claim-limited.js';
import { isPgError, LOCK_NOT_AVAILABLE } from '../sqlstate.js';

export {
  CLAIMABLE,
  JOB_RUNS,
  claimOrder,
  OLDEST_EVERY,
  SERIAL_TURN,
  STARTS_ALLOWED,
  tokensNow,
  type ClaimedExecution,
  type ClaimOptions,
  type ClaimOrder,
} from './claim-gates.js';

// $4 the handlers this worker has; the LIMIT is a parameter ($5) or a constant (see below).
// Candidates of one priority level (`lvl`) in due order, locked or (to be merged, see
// oldestAcrossLevels) not. Ungated executions only (migration 000044: those of the endpoints
// without limits), and the endpoint's limits checked too, by jobgate_endpoint_limited: the one
// definition of a limited endpoint, which the triggers that keep the flag use as well.
//
// The endpoint is read per candidate by primary key, in a scalar subquery: Postgres keeps it as a
// filter of the walk and never turns it into a join, so the walk is always the index's due order
// (executions_due_priority) stopped by the LIMIT, whatever the statistics say. As a join, the
// planner was free to start from the endpoints, and once the tables were analyzed it did: it read
// every pending execution of each endpoint and sorted them all for the first 50 (a claim of 50
// took 35 ms with 2,450 pending, and grew with the backlog). The job is not read at all: whether
// it lets the execution run is on the execution (job_held, migration 000055). Read here, its plan,
// made while jobs was small, scanned the whole table per candidate once it had grown.
const unlimitedCandidates = (limit: string, lvl: string, lock: boolean) => `
  select e.id, e.run_after
  from executions e
  where e.status = 'PENDING'
    and e.run_after <= now()
    and not e.gated
    and not e.blocked
    and e.priority = ${lvl}
    and ${SERIAL_TURN}
    and not e.job_held
    and (select not jobgate_endpoint_limited(en) and ${DELIVERABLE('$4')} from endpoints en where en.id = e.endpoint_id)
  order by e.run_after, e.id
  limit ${limit}
  ${lock ? 'for update of e skip locked' : ''}`;

const claimUnlimitedSql = (limit: string, order: ClaimOrder) =>
  order === 'OLDEST'
    ? `
with recursive ${priorityLevels('not e.gated and not e.blocked')}, ${oldestAcrossLevels(limit, (lvl) => unlimitedCandidates(limit, lvl, false), false)}
${claimTail()}`
    : `
with recursive ${priorityLevels('not e.gated and not e.blocked')}, candidates as (
  select c.id from (select p from levels where p is not null order by p desc) l cross join lateral (${unlimitedCandidates(limit, 'l.p', true)}) c
  limit ${limit}
${claimTail()}`;

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
    if (o.awaitEndpoint && o.order !== 'OLDEST') return await pipelined(client, () => claimAwaiting(client, o, token, o.awaitEndpoint!));
    return await transactionOn(client, () => claimWithLimits(client, o, token));
  } catch (error) {
    // The wait for a limited endpoint's lock ran out: rolled back, nothing claimed, still held.
    if (o.awaitEndpoint && isPgError(error, LOCK_NOT_AVAILABLE)) {
      o.contended?.([o.awaitEndpoint]);
      return [];
    }
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
 * A claim that waits for limited endpoint `endpointId`'s lock and claims it first (ClaimOptions.
 * awaitEndpoint; not an OLDEST claim), in two trips instead of five: BEGIN, the unlimited claim
 * and the wait are sent together, then the endpoint's claim with the COMMIT behind it. The lock
 * is held from the wait's answer to the commit, and the other claims on the endpoint wait that
 * out: no trip back to the worker between its claim and its commit. The endpoint's claim is one
 * statement (its first window of keys): when it takes less than the room, the claim says so
 * (ClaimOptions.cutShort) and the worker claims again at once, the usual way, for the other
 * limited endpoints and the endpoint's next keys; the transaction, committed, cannot go on.
 * When the wait finds the endpoint no longer claimable, the claim goes on the usual way.
 *
 * The wait is in a savepoint: sent with the unlimited claim, it runs even when that claim filled
 * the room, and a wait that runs out rolls back to the savepoint only, so the unlimited claim
 * still commits (and the endpoint is reported contended).
 */
async function claimAwaiting(client: pg.PoolClient, o: ClaimOptions, token: string, endpointId: string): Promise<ClaimedExecution[]> {
  let open = false;
  try {
    const begun = client.query('begin');
    open = true;
    const first = await Promise.allSettled([
      begun,
      client.query<ClaimedExecution>(claimUnlimited(o, token)),
      client.query('savepoint awaiting'),
      awaitEndpointLock(client, endpointId, o.handlers, o.limitedDue),
      client.query('release savepoint awaiting'),
    ]);
    const [, unlimited, , awaitedAnswer] = first;
    if (unlimited.status === 'rejected') throw unlimited.reason;
    const rows = unlimited.value.rows;
    if (awaitedAnswer.status === 'rejected' && isPgError(awaitedAnswer.reason, LOCK_NOT_AVAILABLE)) {
      valuesOf(await Promise.allSettled([client.query('rollback to savepoint awaiting'), client.query('commit')]));
      open = false;
      o.contended?.([endpointId]);
      return rows;
    }
    const [, , , awaited] = valuesOf(first);
    const room = o.limit - rows.length;
    if (room > 0 && awaited) {
      const [claim, commit] = await Promise.allSettled([claimEndpointOnce(client, o, token, awaited, room), client.query('commit')]);
      open = false;
      if (claim.status === 'rejected') {
        // Refused by the server, the claim made the COMMIT behind it a ROLLBACK. Refused on this
        // side only (an answer pg could not read), it left the transaction whole, and the COMMIT
        // committed what it took: handed back as a lost answer's.
        if (commit.status === 'fulfilled' && commit.value.command === 'COMMIT') throw new ClaimAnswerLost(token, claim.reason);
        throw claim.reason;
      }
      if (commit.status === 'rejected') throw commit.reason;
      if (claim.value.length < room) o.cutShort?.();
      return [...rows, ...claim.value];
    }
    const more = room > 0 ? await claimLimited(client, o, token, room) : [];
    await client.query('commit');
    open = false;
    return [...rows, ...more];
  } catch (error) {
    // A statement that failed made the COMMIT sent behind it a ROLLBACK; this one then answers
    // with a warning only.
    if (open) await client.query('rollback').catch(() => {});
    throw error;
  }
}

/**
 * The answers of statements sent together, in order; the first refusal, as the statements
 * after it were refused for it (the transaction was aborted).
 */
function valuesOf<T extends readonly unknown[]>(settled: { [K in keyof T]: PromiseSettledResult<T[K]> }): T {
  const refused = settled.find((s) => s.status === 'rejected');
  if (refused) throw refused.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * Runs `fn` with `client` in pg's pipeline mode: each statement is sent at once, without waiting
 * for the answers of those before it (Postgres runs them in order, each with its own sync). pg
 * reads the mode at every send and answer, so it is switched only while the client is idle: `fn`
 * awaits every statement it sends.
 */
async function pipelined<T>(client: pg.PoolClient, fn: () => Promise<T>): Promise<T> {
  const modal = client as unknown as { pipeline: boolean };
  modal.pipeline = true;
  try {
    return await fn();
  } finally {
    modal.pipeline = false;
  }
}

/**
 * A claim when some endpoint has limits: the unlimited endpoints' statement, then each limited
 * endpoint whose lock this transaction can take, while there is room. An OLDEST claim (one in
 * OLDEST_EVERY) serves the limited endpoints first, so a steady backlog on unlimited endpoints
 * cannot keep them from ever starting.
 */
async function claimWithLimits(client: pg.PoolClient, o: ClaimOptions, token: string): Promise<ClaimedExecution[]> {
  // The wait for a limited endpoint's lock (ClaimOptions.awaitEndpoint) right before the limited
  // claims, so the lock is held no longer than they need: the other claims on the endpoint wait
  // for it. Nothing that holds such a lock waits for the rows the unlimited claim took (claims
  // take rows SKIP LOCKED), so waiting while holding them closes no cycle.
  const limited = async (room: number) => {
    const awaited = o.awaitEndpoint ? await awaitEndpointLock(client, o.awaitEndpoint, o.handlers, o.limitedDue) : undefined;
    return claimLimited(client, o, token, room, awaited);
  };
  if (o.order !== 'OLDEST') {
    const rows = (await client.query<ClaimedExecution>(claimUnlimited(o, token))).rows;
    return o.limit - rows.length > 0 ? [...rows, ...(await limited(o.limit - rows.length))] : rows;
  }
  const rows = await limited(o.limit);
  if (o.limit - rows.length <= 0) return rows;
  return [...rows, ...(await client.query<ClaimedExecution>(claimUnlimited({ ...o, limit: o.limit - rows.length }, token))).rows];
}

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
), handed as (
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
  returning e.id, e.status, e.claim_token as token
), woken as (
  -- Other workers may have room for what came back to the queue (this one claims again right
  -- after): one wake, in this statement, when any did.
  select pg_notify($3, $4) from handed where status = 'PENDING' limit 1
)
select h.id, h.status, h.token from handed h
cross join (select count(*) from woken) as sent -- referenced, so that the wake is sent`;

export async function handBackLostClaims(
  pool: pg.Pool,
  workerId: string,
  tokens: string[],
): Promise<{ id: string; status: 'PENDING' | 'CANCELLED'; token: string }[]> {
  if (tokens.length === 0) return [];
  const { rows } = await pool.query<{ id: string; status: 'PENDING' | 'CANCELLED'; token: string }>(HAND_BACK_LOST, [
    workerId,
    tokens,
    workChannel.name,
    workChannel.encode({ kind: 'work' }),
  ]);
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
 *
 * `sinceClaimMs`: how long ago the worker's last claim was sent. What became claimable since
 * then (an execution falling due, a bucket's next whole token, a Retry-After ending) that claim
 * could not see, and this query no longer counts as ahead: it answers 0 for it. Without the
 * window, such a change between the claim and this query (a rate limit of 250 a second refills
 * a token every 4 ms) left the worker asleep until its next poll, seconds later: a drain at a
 * tenth of the endpoint's rate. The window is widened by TRANSIT_MS, for the time this query
 * takes to reach the database, which the host's clock does not see; too wide costs a claim that
 * finds nothing, too narrow a sleep until the poll.
 */
const TRANSIT_MS = 10;

export async function nextDueInMs(pool: pg.Pool, sinceClaimMs = 0): Promise<number | null> {
  // Only work ahead, and what came due since the last claim: past-due rows this worker cannot
  // deliver (paused job, a handler it lacks) would otherwise wake it in a loop; each claim moves
  // the window past them.
  // Named: an idle worker runs this after every short claim; planning it each time cost more
  // than running it.
  // Also the next token of a rate-limited endpoint whose bucket was short of a whole token at the
  // last claim, with due work waiting: the claim left that work for later, and nothing else wakes
  // the worker when the token comes. The same for a concurrency key's bucket (a key rate limit),
  // among those written within one token's time of the claim, the only ones that can have been
  // short of a whole token. A bucket that had a whole token at the claim is claimable, or held by
  // something else that wakes the worker: counted, it would wake the worker in a loop.
  // And the end of a target's Retry-After, which held its endpoint's due work (at most one wake
  // for each, whether or not work waits: cheaper than finding out).
  const { rows } = await pool.query({
    name: 'jobgate.next-due',
    text: `with since as (select make_interval(secs => $1::float8 / 1000) as span)
           -- Nothing ahead stays null (greatest would make it 0, a wake at once).
           select case when n is null then null else greatest(0, n) end as in_ms from (select least(
             (select extract(epoch from min(run_after) - now()) * 1000
              from executions where status = 'PENDING' and not blocked and run_after > now() - (select span from since)),
             (select min((1 - t.tokens) * en.rate_limit_period_ms / en.rate_limit_count)
              from endpoints en
              join endpoint_rate_buckets b on b.endpoint_id = en.id
              cross join lateral (select ${tokensNow('en', 'b')} as tokens) t
              where en.rate_limit_count is not null
                and ${tokensNow('en', 'b', 'rate_limit', 'clock_timestamp() - (select span from since)')} < 1
                and exists (select 1 from executions e where e.endpoint_id = en.id and e.status = 'PENDING' and e.gated and not e.blocked and e.run_after <= now())),
             (with dry as materialized (
                select kb.endpoint_id, kb.concurrency_key, (1 - t.tokens) * en.key_rate_limit_period_ms / en.key_rate_limit_count as in_ms
                from endpoints en
                join endpoint_key_rate_buckets kb on kb.endpoint_id = en.id
                  and kb.refilled_at > now() - make_interval(secs => en.key_rate_limit_period_ms::float8 / en.key_rate_limit_count / 1000) - (select span from since)
                cross join lateral (select ${tokensNow('en', 'kb', 'key_rate_limit')} as tokens) t
                where en.key_rate_limit_count is not null
                  and ${tokensNow('en', 'kb', 'key_rate_limit', 'clock_timestamp() - (select span from since)')} < 1
              )
              select min(d.in_ms) from dry d
              -- One probe per dry key (the LIMIT keeps it a probe, not a join over all the pending).
              where exists (select 1 from executions e where e.endpoint_id = d.endpoint_id and e.concurrency_key = d.concurrency_key
                                                        and e.status = 'PENDING' and e.gated and not e.blocked and e.run_after <= now() limit 1)),
             (select extract(epoch from min(ra.until) - now()) * 1000 from endpoint_retry_after ra where ra.until > now() - (select span from since))
           ) as n) ahead`,
    values: [Math.max(0, sinceClaimMs) + TRANSIT_MS],
  });
  const inMs = rows[0]?.in_ms as string | number | null | undefined;
  return inMs == null ? null : Number(inMs);
}

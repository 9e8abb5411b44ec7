/**
 * The limited endpoints' claims: endpoints with a concurrency or a rate limit, a per-key limit, or
 * a workspace's cap. Their pending executions are gated (migration 000044), so the unlimited claim
 * (claim.ts) never reads them; each is claimed here under a transaction-scoped advisory lock per
 * endpoint (and per capped workspace), in the claim's transaction after the unlimited statement:
 * the running counts and the buckets are read after the lock is taken, and the lock is held until
 * the claimed rows commit as RUNNING, so two workers can never both fill the same free slots or
 * spend the same tokens.
 */
import { LOCK_CLASS } from '../advisory-locks.js';
import type pg from 'pg';
import {
  CLAIMABLE,
  claimTail,
  DELIVERABLE,
  oldestAcrossLevels,
  priorityLevels,
  SERIAL_TURN,
  STARTS_ALLOWED,
  tokensNow,
  type ClaimedExecution,
  type ClaimOptions,
  type ClaimOrder,
} from './claim-gates.js';

/** Advisory lock classes: a limited endpoint's claims, and a capped workspace's. */
const ENDPOINT_LOCK = LOCK_CLASS.endpointClaims;
const WORKSPACE_LOCK = LOCK_CLASS.workspaceClaims;

/** Endpoint `en`'s claims rotate between concurrency keys (CLAIM_KEYED): it has a per-key limit. */
const KEYED = '(en.key_concurrency_limit is not null or en.key_rate_limit_count is not null)';

/**
 * Limited endpoint `en` (its rate bucket `b`, left joined) has work a claim could start now: this
 * worker may deliver it, it has a whole token when it is rate limited, and a gated execution of it
 * is claimable. `handlers`: the parameter of the worker's handler names.
 */
const LIMITED_DUE = (handlers: string) => `(${DELIVERABLE(handlers)}
                   and (en.rate_limit_count is null or ${tokensNow('en', 'b')} >= 1)
                   and exists (select 1 from executions e
                               where e.endpoint_id = en.id and e.gated and ${CLAIMABLE}))`;

/**
 * Limited endpoints (a concurrency or a rate limit, per key too, or a workspace cap) with due work,
 * and whether this transaction took the endpoint's advisory lock (`locked`), and, for an endpoint
 * its workspace caps, the workspace's lock too (so the workspace's claims count its attempts in
 * flight one after another). An endpoint whose lock another claim holds comes back unlocked: that
 * claim is under way, and this one is short for it, not for want of work (claimLimited reports it).
 * `keyed`: its claims rotate between concurrency keys (CLAIM_KEYED).
 * It also turns JIT compilation off for the rest of the transaction, before the limited claims
 * that follow are planned: their LIMIT is the room counted after the lock (an expression), for
 * which the planner assumes a tenth of the table, so on a server with JIT on (Postgres' default)
 * a claim that runs in a millisecond was compiled first, for 600 ms, every time.
 */
const LOCK_LIMITED = `
select s.id, s.concurrency_limit, s.key_concurrency_limit, s.keyed, s.workspace_locked, s.locked,
       -- A first estimate of its slots in use, for a concurrency limit (the claim counts again).
       case when s.locked and s.concurrency_limit is not null
            then (select count(*) from executions r where r.endpoint_id = s.id and r.status = 'RUNNING')::int end as running
from (
  select en.id, en.concurrency_limit, en.key_concurrency_limit,
         ${KEYED} as keyed,
         -- Capped in this statement's snapshot: the CASE below took the workspace's lock too.
         en.workspace_capped as workspace_locked,
         -- The locks last (a CASE, whose order the planner keeps: it evaluates cheap conditions
         -- of a WHERE first, and would take locks of endpoints it then leaves out), the
         -- endpoint's before its workspace's (a workspace lock taken for an endpoint this claim
         -- then skips would hold the workspace's other endpoints off other workers for nothing).
         -- Null: nothing to claim. A bucket short of a whole token is left alone: read in this
         -- statement's snapshot, from before the lock, it can only show more tokens than the
         -- claim would (spends it has not seen), never fewer.
         case when ${LIMITED_DUE('$1')}
              then case when pg_try_advisory_xact_lock(${ENDPOINT_LOCK}, hashtext(en.id::text))
                        then case when en.workspace_capped then pg_try_advisory_xact_lock(${WORKSPACE_LOCK}, hashtext(en.workspace_id::text))
                                  else true end
                        else false end
         end as locked
  from endpoints en
  left join endpoint_rate_buckets b on b.endpoint_id = en.id
  cross join (select set_config('jit', 'off', true)) jit_off
  where jobgate_endpoint_limited(en)
  -- Evaluated here, once per endpoint: the outer filter on its answer is never pushed into it
  -- (Postgres keeps quals on volatile output columns out of a subquery), and OFFSET 0 says so.
  offset 0
) s
where s.locked is not null`;

/** How long a claim waits for a limited endpoint's lock another claim holds (ClaimOptions.awaitEndpoint). */
export const LOCK_WAIT_MS = 100;

/**
 * Waits for limited endpoint $1's lock, and for its workspace's when the workspace caps it (the two
 * LOCK_LIMITED tries, in its order: every waiter takes them so, and only waiters wait, so no two
 * wait on each other in a cycle), up to LOCK_WAIT_MS each (lock_timeout; Postgres then raises 55P03
 * and the transaction is rolled back). Held to the end of the transaction like the ones
 * LOCK_LIMITED takes. The timeout stays for the rest of the claim, which waits on no other lock:
 * its rows are taken SKIP LOCKED, its buckets under the endpoint's lock. A claim that lost the
 * lock to another one waits here for it to commit, rather than coming back at once (and finding it
 * held again) or sitting idle until its next poll.
 * It answers what LOCK_LIMITED would of the endpoint (`claimable`: it is limited and this worker
 * may deliver it), so the claim goes straight on to its rows: one trip fewer while the lock is
 * held, which the endpoint's other claims wait out. Read in this statement's snapshot, from before
 * the wait: its limits, as LOCK_LIMITED's are; the claim counts what is in flight and reads the
 * buckets itself, in a snapshot of its own taken after the lock was granted.
 */
const AWAIT_LOCK = `
with other_due as (
  -- Another limited endpoint with due work, if any (one is enough): a hint for the worker's next
  -- claim (nextAwait), read before the wait, without any lock.
  select en.id from endpoints en
  left join endpoint_rate_buckets b on b.endpoint_id = en.id
  where jobgate_endpoint_limited(en) and en.id <> $1 and ${LIMITED_DUE('$2')}
  limit 1
)
select en.id, en.concurrency_limit, en.key_concurrency_limit, (select id from other_due) as other_due,
       ${KEYED} as keyed,
       en.workspace_capped as workspace_locked,
       jobgate_endpoint_limited(en) and ${DELIVERABLE('$2')} as claimable,
       pg_advisory_xact_lock(${ENDPOINT_LOCK}, hashtext(en.id::text))::text as endpoint_lock,
       case when en.workspace_capped then pg_advisory_xact_lock(${WORKSPACE_LOCK}, hashtext(en.workspace_id::text))::text end as workspace_lock
from endpoints en
cross join (select set_config('lock_timeout', '${LOCK_WAIT_MS}ms', true)) lock_timeout
-- JIT off for the claim that follows, as LOCK_LIMITED turns it off for the claims after it.
cross join (select set_config('jit', 'off', true)) jit_off
where en.id = $1`;

/** A limited endpoint whose lock the claim's transaction holds, with what its claim needs. */
export interface LockedEndpoint {
  id: string;
  concurrency_limit: number | null;
  key_concurrency_limit: number | null;
  /** Its claims rotate between concurrency keys (CLAIM_KEYED). */
  keyed: boolean;
  /** The transaction holds its workspace's lock too (the workspace caps it). */
  workspace_locked: boolean;
  /** A first estimate of its attempts in flight, under a concurrency limit; null when not counted. */
  running: number | null;
}

/**
 * Waits for `endpointId`'s claim lock in the claim's transaction (AWAIT_LOCK); the endpoint, to be
 * claimed first, or undefined when it is no longer limited or this worker cannot deliver it.
 */
export async function awaitEndpointLock(
  client: pg.PoolClient,
  endpointId: string,
  handlers: string[],
  limitedDue?: (endpointIds: string[]) => void,
): Promise<LockedEndpoint | undefined> {
  const { rows } = await client.query<LockedEndpoint & { claimable: boolean; other_due: string | null }>({
    name: 'jobgate.await-limited',
    text: AWAIT_LOCK,
    values: [endpointId, handlers],
  });
  const ep = rows[0];
  if (!ep?.claimable) return undefined;
  // What the worker's next claim needs to know (nextAwait): whether this one is due alone.
  limitedDue?.(ep.other_due ? [ep.id, ep.other_due] : [ep.id]);
  return { ...ep, running: null };
}

/**
 * The limited claims' first parts ($4 the endpoint, $5 the most this claim may take, $6 the
 * endpoint's concurrency limit: null for none, which least() ignores). `bucket`: a rate-limited
 * endpoint's bucket, refilled for the time since it was last written (no row: a full bucket; no
 * rate limit: no bucket), on clock_timestamp(), not now(): now() is when this transaction began,
 * which may be before the previous holder of the advisory lock wrote the bucket, and would run
 * its clock backwards. `room`: how many the claim may start, counted once: its free slots, its
 * whole tokens, and its workspace's free slots when the workspace has a cap (its attempts in
 * flight on every endpoint it caps, under the workspace's lock, LOCK_LIMITED). All are read in
 * this statement's snapshot, taken after the advisory locks were granted (LOCK_LIMITED is a
 * statement before it): the bucket the previous holder wrote and the claims it committed are seen.
 * `workspaceLocked`, the parameter saying whether LOCK_LIMITED took the workspace's lock: a cap
 * set since that statement (it saw none, and took no lock) leaves this claim no room in the
 * workspace, as its count would not be under the lock (the next claim takes the lock).
 */
const bucketAndRoom = (workspaceLocked: string) => `bucket as materialized (
  select ${tokensNow('en', 'b')} as tokens, clock_timestamp() as at
  from endpoints en left join endpoint_rate_buckets b on b.endpoint_id = en.id
  where en.id = $4 and en.rate_limit_count is not null
), room as materialized (
  select greatest(0, least($5::int,
                           -- Counted only under a limit: least() passes over a null.
                           case when $6::int is not null
                                then $6::int - (select count(*) from executions r where r.endpoint_id = $4 and r.status = 'RUNNING')::int end,
                           (select floor(bk.tokens)::int from bucket bk),
                           (select case when ${workspaceLocked}::boolean
                                        then w.concurrency_limit - (select count(*) from executions r join endpoints x on x.id = r.endpoint_id
                                                                    where r.workspace_id = en.workspace_id and r.status = 'RUNNING'
                                                                      and x.workspace_capped)::int
                                        else 0 end
                            from endpoints en join workspaces w on w.id = en.workspace_id
                            where en.id = $4 and en.workspace_capped))) as n
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

/**
 * Spends what a keyed claim took from each key's bucket (CLAIM_KEYED's lane_tokens), as
 * SPEND_TOKENS does the endpoint's: a key that started nothing is not written.
 */
const SPEND_KEY_TOKENS = `, key_spent as (
  insert into endpoint_key_rate_buckets (endpoint_id, concurrency_key, tokens, refilled_at)
  select $4, lt.k, lt.tokens - count(*), lt.at
  from claimed cl join candidates c on c.id = cl.id join lane_tokens lt on lt.k = c.k
  group by lt.k, lt.tokens, lt.at
  on conflict (endpoint_id, concurrency_key) do update set tokens = excluded.tokens, refilled_at = excluded.refilled_at
)`;

// The endpoint's gated executions (all of its pending ones: it has a limit), one priority level's
// in due order (executions_gated_due), locked or not (as unlimitedCandidates).
const limitedCandidates = (lvl: string, lock: boolean) => `
  select e.id, e.run_after
  from executions e
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
const ENDPOINT_LEVELS = priorityLevels('e.endpoint_id = $4 and e.gated and not e.blocked');
const CLAIM_LIMITED: Record<ClaimOrder, string> = {
  OLDEST: `
with recursive ${ENDPOINT_LEVELS}, ${bucketAndRoom('$7')}, ${oldestAcrossLevels('(select n from room)', (lvl) => limitedCandidates(lvl, false), true)}
${claimTail(SPEND_TOKENS)}`,
  PRIORITY: `
with recursive ${ENDPOINT_LEVELS}, ${bucketAndRoom('$7')}, candidates as (
  select c.id from (select p from levels where p is not null order by p desc) l cross join lateral (${limitedCandidates('l.p', true)}) c
  limit (select n from room)
${claimTail(SPEND_TOKENS)}`,
};

/** The most keys one keyed claim's window looks at; the rotation carries on from there. */
const MAX_KEY_LANES = 100;

/** The first key `op` `than` among the endpoint's pending executions (one probe of executions_pending_key). */
const nextKey = (op: '>' | '>=', than: string) => `(select e.concurrency_key from executions e
     where e.endpoint_id = $4 and e.status = 'PENDING' and e.gated and not e.blocked and e.concurrency_key ${op} ${than}
     order by e.concurrency_key limit 1)`;

/**
 * A keyed endpoint's claim (it has a key_concurrency_limit or a key rate limit), under its advisory
 * lock: the keys with pending work take turns. The lanes are the endpoint's distinct concurrency
 * keys ('' is the lane of executions without one) in key order from just after the rotation's
 * cursor (read from endpoint_key_turns in the statement when $9, else $7; null: from the start;
 * $10 whether LOCK_LIMITED took the workspace's lock, see bucketAndRoom),
 * wrapping round to the start, each found by one probe of executions_pending_key; a key that can
 * start nothing now is passed over (`closed`: its attempts in flight are at the per-key limit $8,
 * or its bucket is short of a whole token), and the claim takes as many open lanes as it has room
 * for and 8 more (a lane whose work is not due, or waits its serial turn, offers nothing), looking
 * at most MAX_KEY_LANES keys each side of the cursor. Each lane looked at is one probe of the index
 * and one read of the lane's work: with 100 keys and room for 50, twice the room read 100 lanes to
 * take 50 (bench/engine.ts gated: 127-151 µs of Postgres time per execution in this statement,
 * 115 with room + 8). Each lane
 * offers its due work in priority and due order, as much as its key has room for (the per-key
 * limit less its attempts in flight, and its whole tokens; the keyless lane is not limited per key)
 * and no more than its share of the claim's room; the claim takes every lane's first, then every
 * lane's second, and so on (turn, then position), up to the endpoint's room, and spends each key's
 * tokens for what it took. The cursor moves to the lane of the last one taken; when the claim had
 * room and took nothing, past every lane it looked at, or, with no open lane, past the keys after
 * the cursor it looked at: the next claim starts after it, so a key with a long backlog gets one
 * turn per round like any other, and keys past the window are reached too. Rows are locked with
 * their state checked again on the locked version: a cancel or a reschedule that committed
 * meanwhile leaves them alone.
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
), ${bucketAndRoom('$10')}, running as materialized (
  select r.concurrency_key as k, count(*)::int as n from executions r
  where r.endpoint_id = $4 and r.status = 'RUNNING' group by 1
), closed as materialized (
  select r.k from running r where r.n >= $8::int
  union
  -- A bucket can be short of a whole token only if it was written within one token's time
  -- (endpoint_key_rate_buckets_recent): the recent writes, not every key's bucket.
  select kb.concurrency_key from endpoints en join endpoint_key_rate_buckets kb on kb.endpoint_id = en.id
  where en.id = $4 and en.key_rate_limit_count is not null
    -- now() (the transaction's start), not clock_timestamp(): a stable bound is an index range;
    -- it reads a little more, and the test on the tokens that follows is exact.
    and kb.refilled_at > now() - make_interval(secs => en.key_rate_limit_period_ms::float8 / en.key_rate_limit_count / 1000)
    and ${tokensNow('en', 'kb', 'key_rate_limit')} < 1
), lanes as materialized (
  -- As many open ones as the claim is likely to need, read lazily: the keys after the cursor come
  -- first, and the round starts over only when they run out (up to and including the cursor's
  -- own key; positions after the first part's).
  select k, n from (
    select k, n from after_cursor where k is not null
    union all
    select f.k, f.n + ${MAX_KEY_LANES} from from_start f
    where f.k is not null and ((select k from turn_from) is null or f.k <= (select k from turn_from))
  ) ring
  where k = '' or k not in (select c.k from closed c)
  limit least(${MAX_KEY_LANES}, (select n from room) + 8)
), lane_tokens as materialized (
  select l.k, ${tokensNow('en', 'kb', 'key_rate_limit')} as tokens, clock_timestamp() as at
  from lanes l
  cross join endpoints en
  left join endpoint_key_rate_buckets kb on kb.endpoint_id = en.id and kb.concurrency_key = l.k
  where en.id = $4 and en.key_rate_limit_count is not null and l.k <> ''
), picked as (
  select c.id, c.turn, l.n as position, l.k
  from lanes l
  cross join lateral (
    select e.id, row_number() over (order by e.priority desc, e.run_after, e.id) as turn
    from executions e
    where e.endpoint_id = $4 and e.concurrency_key = l.k and e.gated and ${CLAIMABLE} and ${SERIAL_TURN}
    order by e.priority desc, e.run_after, e.id
    limit least(
      -- Its share of the room, so a claim reads about as many rows as it may take.
      ceil((select n from room)::numeric / greatest(1, (select count(*) from lanes)))::int,
      case when l.k = '' then (select n from room)
           else least(
             case when $8::int is null then (select n from room)
                  else greatest(0, $8::int - coalesce((select r.n from running r where r.k = l.k), 0)) end,
             coalesce((select floor(lt.tokens)::int from lane_tokens lt where lt.k = l.k), (select n from room))) end)
  ) c
), candidates as (
  select e.id, p.turn, p.position, p.k
  from executions e
  join (select id, turn, position, k from picked order by turn, position limit (select n from room)) p on p.id = e.id
  where e.status = 'PENDING' and e.run_after <= now() and e.gated and not e.blocked
  for update of e skip locked
), turned as (
  insert into endpoint_key_turns (endpoint_id, last_key)
  select $4, t.k from (
    select coalesce((select c.k from candidates c order by c.turn desc, c.position desc limit 1),
                    (select l.k from lanes l order by l.n desc limit 1),
                    (select max(a.k) from after_cursor a)) as k
  ) t
  where (select n from room) > 0 and t.k is not null
  on conflict (endpoint_id) do update set last_key = excluded.last_key
${claimTail(SPEND_TOKENS + SPEND_KEY_TOKENS)}`;

/**
 * Up to `room` executions of the limited endpoints, each under its advisory lock; `o.contended` hears
 * when an endpoint with due work was passed over because another claim held its lock. `awaited`:
 * an endpoint whose lock the transaction waited for and holds (awaitEndpointLock), claimed first;
 * the others are looked for only when it leaves room.
 */
export async function claimLimited(
  client: pg.PoolClient,
  o: ClaimOptions,
  token: string,
  room: number,
  awaited?: LockedEndpoint,
): Promise<ClaimedExecution[]> {
  const rows: ClaimedExecution[] = [];
  if (awaited) {
    rows.push(...(await claimEndpoint(client, o, token, awaited, room)));
    room -= rows.length;
    if (room <= 0) return rows;
  }
  const limited = await client.query<LockedEndpoint & { locked: boolean }>({
    name: 'jobgate.lock-limited',
    text: LOCK_LIMITED,
    values: [o.handlers],
  });
  o.limitedDue?.(limited.rows.map((ep) => ep.id));
  const contended = limited.rows.filter((ep) => !ep.locked).map((ep) => ep.id);
  if (contended.length > 0) o.contended?.(contended);
  for (const ep of limited.rows) {
    // The awaited endpoint had its claim: what it left is not due now.
    if (!ep.locked || ep.id === awaited?.id) continue;
    const more = await claimEndpoint(client, o, token, ep, room);
    rows.push(...more);
    room -= more.length;
    if (room <= 0) break;
  }
  return rows;
}

/**
 * Up to `room` executions of one limited endpoint whose lock the transaction holds, in one
 * statement (a keyed endpoint's first window of keys only, from where its rotation stands): to be
 * sent with the COMMIT behind it (claimExecutions' pipelined claim).
 */
export async function claimEndpointOnce(
  client: pg.PoolClient,
  o: ClaimOptions,
  token: string,
  ep: LockedEndpoint,
  room: number,
): Promise<ClaimedExecution[]> {
  return claimEndpoint(client, o, token, ep, room, 1);
}

/** Up to `room` executions of one limited endpoint whose lock the transaction holds. */
async function claimEndpoint(
  client: pg.PoolClient,
  o: ClaimOptions,
  token: string,
  ep: LockedEndpoint,
  room: number,
  maxKeyWindows = MAX_KEY_WINDOWS,
): Promise<ClaimedExecution[]> {
  // A first estimate; the claim recounts after the lock (the count here may be stale), and
  // reads and spends the bucket of a rate-limited endpoint in the same statement.
  const free = ep.concurrency_limit === null || ep.running === null ? room : Math.min(room, ep.concurrency_limit - ep.running);
  if (free <= 0) return [];
  const order = o.order ?? 'PRIORITY';
  const rows = !ep.keyed
    ? (
        await client.query<ClaimedExecution>({
          name: order === 'OLDEST' ? 'jobgate.claim-limited/oldest' : 'jobgate.claim-limited',
          text: CLAIM_LIMITED[order],
          values: [o.workerId, o.leaseMs, token, ep.id, free, ep.concurrency_limit, ep.workspace_locked],
        })
      ).rows
    : await claimKeyed(
        client,
        o,
        token,
        {
          id: ep.id,
          free,
          concurrencyLimit: ep.concurrency_limit,
          keyLimit: ep.key_concurrency_limit,
          workspaceLocked: ep.workspace_locked,
        },
        maxKeyWindows,
      );
  if (rows.length > 0) o.claimedLimited?.(ep.id);
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
  ep: { id: string; free: number; concurrencyLimit: number | null; keyLimit: number | null; workspaceLocked: boolean },
  maxWindows: number,
): Promise<ClaimedExecution[]> {
  const cursorNow = async () =>
    (await client.query<{ last_key: string }>({ name: 'jobgate.key-turn', text: KEY_TURN, values: [ep.id] })).rows[0]?.last_key ?? null;
  // undefined: the claim reads the cursor itself (the first window, and most claims' only one).
  let cursor: string | null | undefined;
  for (let window = 1; ; window++) {
    const { rows } = await client.query<ClaimedExecution>({
      name: 'jobgate.claim-keyed',
      text: CLAIM_KEYED,
      values: [
        o.workerId,
        o.leaseMs,
        token,
        ep.id,
        ep.free,
        ep.concurrencyLimit,
        cursor ?? null,
        ep.keyLimit,
        cursor === undefined,
        ep.workspaceLocked,
      ],
    });
    if (rows.length > 0 || window >= maxWindows) return rows;
    const moved = await cursorNow();
    if (moved === cursor) return rows;
    cursor = moved;
  }
}

const KEY_TURN = 'select last_key from endpoint_key_turns where endpoint_id = $1';

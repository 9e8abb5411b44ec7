/**
 * The parts every claim path shares (claim.ts, the unlimited path; claim-limited.ts, the limited
 * endpoints'): what is claimable, what a worker may deliver, the serial turn, the priority levels,
 * the token bucket's formula, and the statement's tail that takes the leases and returns what
 * delivery needs. Also read by waitingFor (waiting.ts), so its answers are the claim's own gates.
 */
import type { ConfigRow, EndpointRow, ExecutionRow } from '../types.js';

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
  /** The key that created the config: the writer of its secrets that carry none of their own (ConfigEntry.setBy). */
  config_key_id?: ConfigRow['created_by_key_id'] | null;
  /**
   * The key that created the execution's job, and whether it is an ADMIN's, read only when the
   * endpoint has a config: whose secrets the job's input may name (src/service/endpoints/config-secrets.ts).
   * Null key: a caller without a key.
   */
  job_key_id?: string | null;
  job_key_admin?: boolean | null;
  /**
   * The key that last chose where the endpoint sends (endpoints.aimed_by_key_id), and whether it is
   * an ADMIN's, read only when the endpoint has a config: whose secrets its url and headers may carry.
   */
  endpoint_key_id?: string | null;
  endpoint_key_admin?: boolean | null;
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
export const claimTail = (after = '') => `), claimed as (
  update executions e
  set status = 'RUNNING',
      lease_owner = $1,
      lease_epoch = e.lease_epoch + 1,
      lease_expires_at = now() + make_interval(secs => $2::double precision / 1000),
      attempt_count = e.attempt_count + 1,
      -- The moment of the claim, not its transaction's start (now()): a limited claim's transaction
      -- may have waited for its endpoint's lock, and a rate limit is kept in claim moments.
      attempt_started_at = clock_timestamp(),
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
       -- finished before pinning and was re-driven since (read only then: coalesce stops at the first).
       cl.cancel_requested, cl.serial, coalesce(cl.input, (select j.input from jobs j where j.id = cl.job_id)) as input,
       en.name as endpoint_name, en.kind, en.url, en.method, en.headers,
       en.timeout_ms, en.signing_secret, en.handler_name, cf.entries as config_entries, cl.waited_s,
       cf.created_by_key_id as config_key_id, jk.key_id as job_key_id, jk.admin as job_key_admin,
       en.aimed_by_key_id as endpoint_key_id, jk.aimer_admin as endpoint_key_admin
from claimed cl
join endpoints en on en.id = cl.endpoint_id
left join configs cf on cf.id = en.config_id
-- Who created the job, and whether the key that aimed the endpoint is an ADMIN's, for an endpoint
-- with a config only: whose secrets the input, the url and the headers may carry.
-- OFFSET 0 keeps the subquery from being flattened into a join, which would read the job of every
-- row; kept apart, its cf.id test is a one-time filter, and a row without a config reads nothing.
left join lateral (
  select j.created_by_key_id as key_id, coalesce(k.role = 'ADMIN', false) as admin,
         coalesce((select ek.role = 'ADMIN' from api_keys ek where ek.id = en.aimed_by_key_id), false) as aimer_admin
  from jobs j left join api_keys k on k.id = j.created_by_key_id
  where cf.id is not null and j.id = cl.job_id
  offset 0
) jk on true
-- The worker starts them in this order: the claim's own (ClaimOrder's PRIORITY; an OLDEST claim
-- took the earliest due, and starts the highest of those first).
order by cl.priority desc, cl.run_after, cl.id`;

/**
 * Execution `e`'s job `j` lets it run: the job is ACTIVE, or paused and `e` is a manual trigger.
 * Claims read it from the execution (`not e.job_held`, kept by triggers from this rule, migration
 * 000055), so that they read no job; waitingFor reads it from the job.
 */
export const JOB_RUNS = `(j.status = 'ACTIVE' or (j.status = 'PAUSED' and e.trigger = 'MANUAL'))`;

/**
 * Claimable, the one definition the limited claims use (the execution is `e`): due, PENDING, not
 * waiting for its job's prerequisites (blocked, migration 000047), of a job that lets it run
 * (JOB_RUNS, kept on the execution as job_held). A paused job's executions wait, but for a manual
 * trigger (an operator's explicit "run it anyway"). The unlimited claim (claim.ts) states the same
 * beside its own index's predicate.
 */
export const CLAIMABLE = `e.status = 'PENDING'
    and not e.blocked
    and e.run_after <= now()
    and not e.job_held`;

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
export const DELIVERABLE = (handlers: string) =>
  `((en.kind = 'HTTP' or en.handler_name = any(${handlers}::text[])) and ${STARTS_ALLOWED('en')})`;

// Serial executions (a QUEUE cron job's occurrences) run one at a time, in occurrence order:
// one is a candidate only while none of its job runs and no earlier one of its job is pending.
// Within one statement only the earliest qualifies; a concurrent claim sees the earliest still
// PENDING (its RUNNING is not committed yet) and so takes none of that job's.
// Both look among the job's live executions (executions_workspace_live: an execution's workspace
// and endpoint are its job's), not through its whole history: the earlier-one question behind
// offset 0, or the planner walks the job's history by (job_id, scheduled_for) for the earlier ones.
export const SERIAL_TURN = `(not e.serial or (
      not exists (select 1 from executions r where r.workspace_id = e.workspace_id and r.endpoint_id = e.endpoint_id
                                              and r.job_id = e.job_id and r.status = 'RUNNING')
      and not exists (select 1 from (select p.id, p.scheduled_for, p.serial from executions p
                                     where p.workspace_id = e.workspace_id and p.endpoint_id = e.endpoint_id
                                       and p.job_id = e.job_id and p.status = 'PENDING' offset 0) p
                      where p.serial and (p.scheduled_for, p.id) < (e.scheduled_for, e.id))))`;

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
export const priorityLevels = (among: string) => `levels(p) as (
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
export const oldestAcrossLevels = (limit: string, level: (lvl: string) => string, gated: boolean) => `picked as (
  select c.id from levels l cross join lateral (${level('l.p')}) c
  where l.p is not null
  order by c.run_after, c.id
  limit ${limit}
), candidates as (
  select e.id from executions e join picked p on p.id = e.id
  where e.status = 'PENDING' and e.run_after <= now() and ${gated ? '' : 'not '}e.gated and not e.blocked
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
/**
 * The whole and partial tokens in endpoint `en`'s bucket `b` now: its tokens when last written
 * (none written: a full bucket), refilled at count per period for the time since, capped at the
 * burst. The one formula the claim, the due timer and waitingFor read, for the endpoint's bucket
 * (`limit` 'rate_limit', its columns' prefix) and for a concurrency key's ('key_rate_limit').
 * `at`: the moment to read them at instead of now (the due timer's look back at the last claim);
 * before the bucket was last written, its tokens as written.
 */
export const tokensNow = (en: string, b: string, limit: 'rate_limit' | 'key_rate_limit' = 'rate_limit', at = 'clock_timestamp()') =>
  `least(${en}.${limit}_burst::float8, coalesce(${b}.tokens, ${en}.${limit}_burst)
         + coalesce(greatest(0, extract(epoch from ${at} - ${b}.refilled_at) * 1000), 0)
           * ${en}.${limit}_count / ${en}.${limit}_period_ms)`;

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
  /**
   * Hears the limited endpoints with due work that this claim passed over because another claim
   * held their lock (claimLimited): a claim that comes back short then left work for later.
   */
  contended?: (endpointIds: string[]) => void;
  /**
   * A limited endpoint whose lock this claim waits for before its other limited ones, up to
   * LOCK_WAIT_MS, and claims first: one the worker's previous claim found held, or filled itself
   * from. A wait that runs out claims nothing and is heard by `contended`.
   */
  awaitEndpoint?: string | undefined;
  /**
   * Hears the limited endpoints with due work this claim looked at, locked or not (when it looked
   * at all of them: a claim that waited for one only and filled its room did not).
   */
  limitedDue?: (endpointIds: string[]) => void;
  /** Hears each limited endpoint this claim took executions of. */
  claimedLimited?: (endpointId: string) => void;
  /**
   * Hears that the claim committed before it had looked everywhere (a claim that waited for
   * `awaitEndpoint` and took less than its room there): a short claim then does not mean an empty
   * queue, and the next claim should follow at once.
   */
  cutShort?: () => void;
}

/**
 * The live events' partitions (migration 000062): one per generation, the number writers stamp
 * on each event as they insert it. Keeping them is three steps, each safe to repeat after a crash
 * at any point (src/service/retention/event-partitions.ts runs them, one process at a time):
 *
 *  - rotate: move the writers to the next generation, whose partition was attached a span before
 *    (the spare), and attach the one after; no writer reads a generation without a partition,
 *    nor one attached after its statement began;
 *  - retire an ended generation past every window: count its events per workspace, in chunks of
 *    ids (paced by the caller), then move each workspace's replay horizon past its events there
 *    and audit their removal, in one statement;
 *  - detach the retired partition CONCURRENTLY (writers go on meanwhile; it waits for the open
 *    transactions that might read it) and drop it. A detach cut short is finished at the next turn.
 */
import type pg from 'pg';
import { LOCK_KEY } from '../advisory-locks.js';

/** A generation's partition. `gen` comes from event_generations or the sequence, never from input. */
export function partitionOf(gen: number): string {
  if (!Number.isSafeInteger(gen) || gen < 0) throw new Error(`not a generation: ${gen}`);
  return `events_g${gen}`;
}

/**
 * Runs `fn` on one connection holding the partitions' lock; undefined, without running it, when
 * another process holds it. A session lock, so it spans the detach, which cannot run in a
 * transaction.
 */
export async function withPartitionsLock<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T | undefined> {
  const client = await pool.connect();
  let failure: Error | undefined;
  try {
    const { rows } = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1) as ok', [LOCK_KEY.eventPartitions]);
    if (!rows[0]!.ok) return undefined;
    try {
      return await fn(client);
    } finally {
      await client.query('select pg_advisory_unlock($1)', [LOCK_KEY.eventPartitions]);
    }
  } catch (error) {
    failure = error as Error;
    throw error;
  } finally {
    client.release(failure);
  }
}

/**
 * The generation writers use now, and how long they have. The sequence is what writers read; the
 * row is made here if a rotation's transaction failed after the sequence moved (setval does not
 * roll back), along with the end of the one before.
 */
const CURRENT = `
with cur as (select pg_sequence_last_value('events_generation'::regclass)::int as gen),
made as (
  insert into event_generations (gen, started_at) select gen, now() from cur
  on conflict (gen) do update set started_at = coalesce(event_generations.started_at, excluded.started_at)
), ended as (
  update event_generations set ended_at = clock_timestamp() where gen < (select gen from cur) and ended_at is null
)
select c.gen, coalesce(extract(epoch from now() - g.started_at) * 1000, 0)::float8 as age_ms
from cur c left join event_generations g on g.gen = c.gen`;

/** The current generation and how long it has been written (by the database's clock). */
export async function currentGeneration(client: pg.PoolClient): Promise<{ gen: number; ageMs: number }> {
  const { rows } = await client.query<{ gen: number; age_ms: number }>(CURRENT);
  return { gen: rows[0]!.gen, ageMs: rows[0]!.age_ms };
}

/**
 * Makes sure generation `gen` has its partition, attached (made if missing: the spare ahead, or the
 * current one's after a restore that put the sequence past the partitions), and answers how long
 * ago it was attached. ATTACH takes a lock that lets writers go on (SHARE UPDATE EXCLUSIVE on
 * events); CREATE TABLE ... PARTITION OF would not.
 */
export async function ensureAttached(client: pg.PoolClient, gen: number): Promise<{ attachedAgeMs: number }> {
  const table = partitionOf(gen);
  await client.query(`create table if not exists ${table} (like events including constraints)`);
  const { rows } = await client.query<{ attached: boolean }>(
    `select exists (select 1 from pg_inherits where inhrelid = $1::regclass) as attached`,
    [table],
  );
  if (!rows[0]!.attached) {
    await client.query(`alter table events attach partition ${table} for values in (${gen})`);
    await client.query(`update event_generations set attached_at = now() where gen = $1`, [gen]);
  }
  const age = await client.query<{ age_ms: number }>(
    `with made as (insert into event_generations (gen) values ($1) on conflict (gen) do nothing returning 0::float8 as age_ms)
     select age_ms from made
     union all
     select (extract(epoch from now() - attached_at) * 1000)::float8 from event_generations where gen = $1`,
    [gen],
  );
  return { attachedAgeMs: age.rows[0]!.age_ms };
}

/**
 * Moves the writers from generation `gen` to `gen + 1`, whose partition the caller has had attached
 * for a span (ensureAttached). The sequence moves before the end is stamped, in one transaction,
 * so every row of generation `gen` was written by a transaction that began before its ended_at.
 */
export async function rotate(client: pg.PoolClient, gen: number): Promise<void> {
  await client.query('begin');
  try {
    await client.query(`select setval('events_generation', $1)`, [gen + 1]);
    await client.query(
      `with begun as (update event_generations set started_at = clock_timestamp() where gen = $1 and started_at is null)
       update event_generations set ended_at = clock_timestamp() where gen < $1 and ended_at is null`,
      [gen + 1],
    );
    await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  }
}

/**
 * The longest events window in force, in hours: the installation's ($1), or a workspace's own if
 * longer. A generation is past every window once its end is older than this.
 */
const LONGEST_WINDOW = `select greatest($1::int, (select max(events_hours) from workspace_retention))::int as hours`;

export async function longestEventsWindowHours(db: pg.Pool | pg.PoolClient, installationHours: number): Promise<number> {
  return (await db.query<{ hours: number }>(LONGEST_WINDOW, [installationHours])).rows[0]!.hours;
}

/**
 * Ended generations whose end is older than $1 hours (every row in them is), oldest first, with
 * how far their count has got.
 */
const PAST = `
select gen, retired_at is not null as retired, counted, counted_through::text from event_generations
where ended_at < now() - make_interval(hours => $1::int)
order by gen`;

/** A generation's events per workspace counted so far: its count, and its newest event id. */
export type Counted = Record<string, { n: number; through: number }>;

export async function generationsPast(
  client: pg.PoolClient,
  hours: number,
): Promise<{ gen: number; retired: boolean; counted: Counted; countedThrough: number | null }[]> {
  const { rows } = await client.query<{ gen: number; retired: boolean; counted: Counted; counted_through: string | null }>(PAST, [hours]);
  return rows.map((r) => ({
    gen: r.gen,
    retired: r.retired,
    counted: r.counted,
    countedThrough: r.counted_through === null ? null : Number(r.counted_through),
  }));
}

/** Saves how far a generation's count has got, so a turn cut short goes on from there. */
export async function saveCount(client: pg.PoolClient, gen: number, counted: Counted, through: number): Promise<void> {
  await client.query(`update event_generations set counted = $2, counted_through = $3 where gen = $1`, [
    gen,
    JSON.stringify(counted),
    through,
  ]);
}

/** The lowest and highest event id in generation `gen`'s partition (two probes of its primary key). */
export async function idRange(client: pg.PoolClient, gen: number): Promise<{ lo: number; hi: number } | undefined> {
  const { rows } = await client.query<{ lo: string | null; hi: string | null }>(
    `select min(id)::text as lo, max(id)::text as hi from ${partitionOf(gen)}`,
  );
  return rows[0]!.lo === null ? undefined : { lo: Number(rows[0]!.lo), hi: Number(rows[0]!.hi) };
}

/** Per workspace, how many of generation `gen`'s events have ids in (after, upTo], and the newest. */
export async function countChunk(
  client: pg.PoolClient,
  gen: number,
  after: number,
  upTo: number,
): Promise<{ workspaceId: string; n: number; through: number }[]> {
  const { rows } = await client.query<{ workspace_id: string; n: number; through: string }>(
    `select workspace_id::text, count(*)::int as n, max(id)::text as through from ${partitionOf(gen)}
     where id > $1 and id <= $2 group by workspace_id`,
    [after, upTo],
  );
  return rows.map((r) => ({ workspaceId: r.workspace_id, n: r.n, through: Number(r.through) }));
}

/**
 * Retires generation $1, given its events per workspace ($2 workspaces, $3 counts, $4 newest ids,
 * counted beforehand in paced chunks): each workspace's replay horizon (migration 000014) moves to its
 * newest event there, and an audit row and its slice's count record them, as a batch of the EVENTS
 * slice would; then the generation is marked retired, so a retry after a crash neither audits
 * twice nor skips the horizon.
 */
const RETIRE = `
with kept as (
  select * from unnest($2::uuid[], $3::int[], $4::bigint[]) as k(workspace_id, n, through)
), horizon as (
  update workspaces w set events_pruned_through = greatest(w.events_pruned_through, k.through)
  from kept k where w.id = k.workspace_id
), counted as (
  update retention_slices s set pruned_total = pruned_total + k.n
  from kept k where s.workspace_id = k.workspace_id and s.kind = 'EVENTS'
), audited as (
  insert into audit_log (workspace_id, actor_kind, action, target_type, target_id, input, result_code)
  select k.workspace_id, 'system', 'retention.prune', 'Workspace', k.workspace_id::text,
         jsonb_build_object('kind', 'EVENTS', 'events', k.n, 'generation', $1::int), 'OK'
  from kept k join workspaces w on w.id = k.workspace_id
)
update event_generations set retired_at = now() where gen = $1 and retired_at is null`;

export async function retire(
  client: pg.PoolClient,
  gen: number,
  kept: readonly { workspaceId: string; events: number; through: number }[],
): Promise<void> {
  await client.query(RETIRE, [gen, kept.map((k) => k.workspaceId), kept.map((k) => k.events), kept.map((k) => k.through)]);
}

/** Partitions of events whose detach was cut short (they hold no rows a reader can still see). */
const PENDING = `
select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
where i.inhparent = 'events'::regclass and i.inhdetachpending`;

/**
 * Detaches and drops a retired generation's partition. The detach waits for every open
 * transaction that might read it, but under a lock writers do not wait for; `lockTimeoutMs` bounds
 * that wait, and a detach it cuts short is left pending (false) and finished by `finishDetaches`
 * next turn.
 */
export async function dropGeneration(client: pg.PoolClient, gen: number, lockTimeoutMs: number): Promise<boolean> {
  const table = partitionOf(gen);
  const { rows } = await client.query<{ attached: boolean; exists: boolean }>(
    `select to_regclass($1) is not null as exists,
            exists (select 1 from pg_inherits where inhrelid = to_regclass($1)) as attached`,
    [table],
  );
  if (rows[0]!.attached && !(await withLockTimeout(client, lockTimeoutMs, `alter table events detach partition ${table} concurrently`)))
    return false;
  await forget(client, gen, rows[0]!.exists);
  return true;
}

/** Finishes detaches cut short: the generations dropped, and whether one still waits for open transactions. */
export async function finishDetaches(client: pg.PoolClient, lockTimeoutMs: number): Promise<{ dropped: number[]; waiting: boolean }> {
  const { rows } = await client.query<{ name: string }>(PENDING);
  const dropped: number[] = [];
  for (const { name } of rows) {
    const gen = Number(/^events_g(\d+)$/.exec(name)?.[1]);
    if (!(await withLockTimeout(client, lockTimeoutMs, `alter table events detach partition ${partitionOf(gen)} finalize`)))
      return { dropped, waiting: true };
    await forget(client, gen, true);
    dropped.push(gen);
  }
  return { dropped, waiting: false };
}

async function forget(client: pg.PoolClient, gen: number, exists: boolean) {
  if (exists) await client.query(`drop table ${partitionOf(gen)}`);
  await client.query('delete from event_generations where gen = $1', [gen]);
}

/** The lock_timeout error. */
const LOCK_NOT_AVAILABLE = '55P03';

/** Runs a detach under a lock_timeout of `ms`; false when the wait ran out (the detach is left pending). */
async function withLockTimeout(client: pg.PoolClient, ms: number, statement: string): Promise<boolean> {
  await client.query(`select set_config('lock_timeout', $1, false)`, [`${Math.max(1, Math.round(ms))}ms`]);
  try {
    await client.query(statement);
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return false;
    throw error;
  } finally {
    await client.query('reset lock_timeout');
  }
}

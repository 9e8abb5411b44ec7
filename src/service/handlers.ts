/**
 * The handler catalogue: what the live workers registered (HANDLER for HANDLER endpoints,
 * RECOVERABLE, INTERVAL), with cadence and last outcome; and triggering an interval handler now
 * (the only way an on-demand one runs), optionally waiting for that tick's outcome.
 *
 * Scoping: handlers are code in worker processes, not tenant data, so the catalogue (names,
 * kinds, workers, interval cadence and outcomes) is the installation's and any authenticated
 * caller may read it; where workers run and handler error text only installation admins see. What belongs to a workspace is shown for the caller's workspace only: the
 * last run of a recoverable handler and its schedule (which triggers runs in one workspace).
 * Triggering an interval handler changes installation-level work, so it needs ADMIN.
 */
import { sql } from 'kysely';
import { z } from 'zod';
import { text } from './inputs.js';
import { scoped, type Executor } from '../db/repos/scope.js';
import { seesInstallation, type Actor } from './actor.js';
import { mutate } from './audit.js';
import { parseInput, type ServiceContext } from './context.js';
import { intervalTick, msUntilFirstWorkerStale, type IntervalTickRow } from '../db/repos/handlers.js';
import { ConflictError, NoLiveWorkerError, NotFoundError, ValidationError } from './errors.js';
import { pageSchema, type PageInput } from './inputs.js';
import { pageConnection, pageSize, type Connection } from './pagination.js';
import { opaqueWorkerId } from './models.js';
import { toRun, type Run } from './runs.js';

export type HandlerKind = 'HANDLER' | 'RECOVERABLE' | 'INTERVAL';

export interface WorkerInfo {
  id: string;
  host: string | null;
  pid: number | null;
  startedAt: Date;
  heartbeatAt: Date;
}

export interface HandlerCadence {
  everyMs: number | null;
  cron: string | null;
  timezone: string | null;
}

export interface HandlerOutcome {
  status: 'OK' | 'ERROR';
  /** OK: what the handler returned as its count, if anything. */
  count: number | null;
  /** ERROR: HANDLER (it threw), TIMEOUT (ran past its timeout), CRASHED (its worker died mid-run). */
  cause: 'HANDLER' | 'TIMEOUT' | 'CRASHED' | null;
  message: string | null;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export interface IntervalState {
  /** No cadence: it runs only when triggered. */
  onDemand: boolean;
  timeoutMs: number | null;
  nextDueAt: Date | null;
  running: boolean;
  runningSince: Date | null;
  /** The worker running it now. */
  runningOn: string | null;
  okRuns: number;
  errorRuns: number;
  /** Cadence ticks skipped because a tick was still running when they came due, all time. */
  skippedTicks: number;
}

export interface RunScheduleState {
  cadence: HandlerCadence;
  nextDueAt: Date | null;
  ticks: number;
  /** Ticks that found a run active and started nothing. */
  ticksOnActiveRun: number;
  lastTickAt: Date | null;
  lastTickOutcome: 'STARTED' | 'RESUMED' | 'ACTIVE' | 'HELD' | null;
  lastTickRunId: string | null;
  lastError: string | null;
  lastErrorAt: Date | null;
}

export interface HandlerInfo {
  kind: HandlerKind;
  name: string;
  /** INTERVAL: its period; RECOVERABLE: its schedule in the caller's workspace; HANDLER: null. */
  cadence: HandlerCadence | null;
  /** The live workers that registered it, oldest first. */
  workers: WorkerInfo[];
  /** INTERVAL only (installation-level). */
  lastOutcome: HandlerOutcome | null;
  interval: IntervalState | null;
  /** RECOVERABLE only, in the caller's workspace. */
  schedule: RunScheduleState | null;
  lastRun: Run | null;
}

export const handlerFilterSchema = z.object({
  kind: z.enum(['HANDLER', 'RECOVERABLE', 'INTERVAL']).nullish(),
  name: text().max(200).nullish(),
});
export type HandlerFilter = z.input<typeof handlerFilterSchema>;

/** The longest a trigger may wait for its tick's outcome, and the default wait. */
export const MAX_TRIGGER_WAIT_MS = 120_000;
export const DEFAULT_TRIGGER_WAIT_MS = 30_000;
/**
 * The wait's longest pause between two reads of the row. A read is a primary-key probe; at this
 * pace the longest wait makes about 1,200 of them. The wait's own latency (from the tick's end to
 * the answer, `npm run bench intervals`, engine poll 1 s, median of 10): 229 ms with a 500 ms
 * ceiling, 75 ms with this one. Most of a wait is the workers' poll period, which finds the tick.
 */
const WAIT_POLL_MAX_MS = 100;

export const triggerHandlerSchema = z.object({
  name: z.string().regex(/^[A-Za-z0-9_.:-]{1,200}$/, 'must be 1-200 letters, digits, _ . : -'),
  force: z.boolean().nullish(),
  /** Wait for the triggered tick's outcome (up to waitTimeoutMs) and return it. */
  wait: z.boolean().nullish(),
  waitTimeoutMs: z.number().int().min(1).max(MAX_TRIGGER_WAIT_MS).nullish(),
});
export type TriggerHandlerInput = z.input<typeof triggerHandlerSchema>;

/** The tick a trigger made due, as its wait left it. */
export interface TriggeredTick {
  /**
   * FINISHED: its outcome is recorded (a TIMEOUT is recorded at the deadline, while the handler
   * may still be returning); RUNNING: a worker took it, and it had not ended when the wait ran
   * out; PENDING: no worker had taken it yet when the wait ran out.
   */
  state: 'FINISHED' | 'RUNNING' | 'PENDING';
  /** FINISHED: how it ended. */
  outcome: HandlerOutcome | null;
  /** FINISHED: from its start to its outcome, in ms. */
  durationMs: number | null;
}

/** The catalogue as a live subscription reads it (./live.ts authorises nothing more: any key may read it). */
export interface HandlerCatalogSnapshot {
  handlers: HandlerInfo[];
  /** When to read it again even without a hint: the first live worker goes stale then (ms; null: no live worker). */
  recheckInMs: number | null;
}

export interface TriggerHandlerResult {
  handler: HandlerInfo;
  /** DUE_NOW: its next tick is now; QUEUED_AFTER_RUNNING (force, while running): one more tick right after the running one. */
  outcome: 'DUE_NOW' | 'QUEUED_AFTER_RUNNING';
  /** With `wait`: the triggered tick; null without. */
  tick: TriggeredTick | null;
}

/** A timestamptz that is a real instant ('infinity' comes back as a number). */
const instant = (v: unknown): Date | null => (v instanceof Date && !Number.isNaN(v.getTime()) ? v : null);
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** The last outcome held by an interval handler's row; null before its first. */
function outcomeOf(
  r: Pick<IntervalTickRow, 'last_status' | 'last_count' | 'last_cause' | 'last_error' | 'last_started_at' | 'last_finished_at'>,
): HandlerOutcome | null {
  if (!r.last_status) return null;
  return {
    status: r.last_status,
    count: num(r.last_count),
    cause: r.last_cause,
    message: r.last_error,
    startedAt: instant(r.last_started_at),
    finishedAt: instant(r.last_finished_at),
  };
}

async function catalogue(ex: Executor, actor: Actor, filter: { kind?: HandlerKind | null; name?: string | null }): Promise<HandlerInfo[]> {
  const ws = scoped(actor.workspaceId);
  const kind = filter.kind ?? null;
  const name = filter.name ?? null;
  // Live workers only: heartbeated within their own staleness window.
  const regs = await sql<{
    id: string;
    host: string;
    pid: number;
    started_at: Date;
    heartbeat_at: Date;
    kind: HandlerKind;
    name: string;
    timeout_ms: string | null;
    scheduled_here: boolean;
  }>`
    select w.id, w.host, w.pid, w.started_at, w.heartbeat_at, h.kind, h.name, h."timeoutMs" as timeout_ms,
           -- A recoverable registered with a schedule in the caller's workspace.
           (h.kind = 'RECOVERABLE' and (h.cron is not null or h."everyMs" is not null)
            and h.workspace = (select slug from workspaces where id = ${ws})) as scheduled_here
    from workers w cross join lateral jsonb_to_recordset(w.handlers)
      as h(kind text, name text, "timeoutMs" bigint, "everyMs" bigint, cron text, workspace text)
    where w.heartbeat_at > now() - make_interval(secs => w.stale_ms / 1000.0)
      and (${kind}::text is null or h.kind = ${kind}) and (${name}::text is null or h.name = ${name})
    order by h.kind, h.name, w.started_at, w.id`.execute(ex);
  const byKey = new Map<string, HandlerInfo & { timeoutMs: number | null; scheduledHere: boolean }>();
  for (const r of regs.rows) {
    const key = `${r.kind}\u0000${r.name}`;
    let h = byKey.get(key);
    if (!h) {
      h = {
        kind: r.kind,
        name: r.name,
        cadence: null,
        workers: [],
        lastOutcome: null,
        interval: null,
        schedule: null,
        lastRun: null,
        timeoutMs: num(r.timeout_ms),
        scheduledHere: false,
      };
      byKey.set(key, h);
    }
    h.scheduledHere ||= r.scheduled_here;
    if (!h.workers.some((w) => w.id === r.id))
      h.workers.push({ id: r.id, host: r.host, pid: r.pid, startedAt: r.started_at, heartbeatAt: r.heartbeat_at });
  }
  const all = [...byKey.values()];
  const intervalNames = all.filter((h) => h.kind === 'INTERVAL').map((h) => h.name);
  const recoverableNames = all.filter((h) => h.kind === 'RECOVERABLE').map((h) => h.name);

  if (intervalNames.length > 0) {
    const { rows } = await sql<any>`select * from interval_handlers where name = any(${intervalNames}::text[])`.execute(ex);
    const rowOf = new Map(rows.map((r) => [r.name as string, r]));
    for (const h of all.filter((x) => x.kind === 'INTERVAL')) {
      const r = rowOf.get(h.name);
      if (!r) continue;
      const onDemand = r.every_ms === null;
      h.cadence = onDemand ? null : { everyMs: Number(r.every_ms), cron: null, timezone: null };
      h.interval = {
        onDemand,
        timeoutMs: h.timeoutMs,
        nextDueAt: instant(r.next_due_at),
        running: r.owner !== null,
        runningSince: instant(r.run_started_at),
        runningOn: r.owner,
        okRuns: Number(r.ok_runs),
        errorRuns: Number(r.error_runs),
        skippedTicks: Number(r.skipped_ticks),
      };
      h.lastOutcome = outcomeOf(r);
    }
  }

  if (recoverableNames.length > 0) {
    const schedules =
      await sql<any>`select * from run_schedules where workspace_id = ${ws} and name = any(${recoverableNames}::text[])`.execute(ex);
    // The newest run of each name: one probe per name of runs_workspace_name_created (000011),
    // not a sort of every run the handler ever had.
    const lastRuns = await sql<any>`
      select r.* from unnest(${recoverableNames}::text[]) as n(name)
      cross join lateral (
        select * from runs where workspace_id = ${ws} and name = n.name order by created_at desc, id desc limit 1
      ) r`.execute(ex);
    const scheduleOf = new Map(schedules.rows.map((r) => [r.name as string, r]));
    const runOf = new Map(lastRuns.rows.map((r) => [r.name as string, r]));
    for (const h of all.filter((x) => x.kind === 'RECOVERABLE')) {
      // A schedule row whose handler is no longer scheduled here (by any live worker) is history, not shown.
      const s = h.scheduledHere ? scheduleOf.get(h.name) : undefined;
      if (s) {
        const cadence = { everyMs: num(s.every_ms), cron: s.cron_expression, timezone: s.timezone };
        h.cadence = cadence;
        h.schedule = {
          cadence,
          nextDueAt: instant(s.next_due_at),
          ticks: Number(s.ticks),
          ticksOnActiveRun: Number(s.ticks_on_active),
          lastTickAt: instant(s.last_tick_at),
          lastTickOutcome: s.last_tick_outcome,
          lastTickRunId: s.last_tick_run_id,
          lastError: s.last_error,
          lastErrorAt: instant(s.last_error_at),
        };
      }
      const run = runOf.get(h.name);
      if (run) h.lastRun = toRun(run);
    }
  }
  return all.map(({ timeoutMs: _t, scheduledHere: _s, ...h }) => h);
}

/**
 * For a tenant's keys: the catalogue without where workers run and without handler error text,
 * which belong to the installation (and an error can carry anything). Worker ids become their
 * digest, so `runningOn` still matches `workers`.
 */
function withoutInstallationDetails(h: HandlerInfo): HandlerInfo {
  return {
    ...h,
    workers: h.workers.map((w) => ({ ...w, id: opaqueWorkerId(w.id), host: null, pid: null })),
    lastOutcome: h.lastOutcome ? { ...h.lastOutcome, message: null } : null,
    interval: h.interval ? { ...h.interval, runningOn: h.interval.runningOn === null ? null : opaqueWorkerId(h.interval.runningOn) } : null,
  };
}

/** Catalogue order: by kind, then name, in code-unit order (the same in every process). */
function byCatalogueKey(a: { kind: string; name: string }, b: { kind: string; name: string }): number {
  if (a.kind !== b.kind) return a.kind < b.kind ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

const encodeHandlerCursor = (h: { kind: string; name: string }) => Buffer.from(`h1:${h.kind}:${h.name}`).toString('base64url');

function decodeHandlerCursor(cursor: string): { kind: HandlerKind; name: string } {
  const match = /^h1:(HANDLER|RECOVERABLE|INTERVAL):(.+)$/s.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw ValidationError.at(['after'], 'is not a cursor returned by this list');
  return { kind: match[1] as HandlerKind, name: match[2]! };
}

/** The catalogue entry as this actor may see it: every answer that carries one goes through here. */
const handlerFor = (actor: Actor, h: HandlerInfo) => (seesInstallation(actor) ? h : withoutInstallationDetails(h));

export function createHandlersService(ctx: ServiceContext) {
  /**
   * Polls the handler's row (no transaction, the connection released between reads) until a tick
   * taken after `epoch` has its outcome, or `timeoutMs` runs out.
   */
  async function awaitTick(name: string, epoch: bigint, timeoutMs: number): Promise<TriggeredTick> {
    const deadline = performance.now() + timeoutMs;
    let pause = 25;
    for (;;) {
      const row = await intervalTick(ctx.db, name);
      if (!row) throw new NotFoundError('Handler', name);
      if (row.last_epoch !== null && BigInt(row.last_epoch) > epoch) {
        const outcome = outcomeOf(row);
        const durationMs =
          outcome?.startedAt && outcome.finishedAt ? Math.max(0, outcome.finishedAt.getTime() - outcome.startedAt.getTime()) : null;
        return { state: 'FINISHED', outcome, durationMs };
      }
      const left = deadline - performance.now();
      if (left <= 0)
        return { state: BigInt(row.epoch) > epoch && row.owner !== null ? 'RUNNING' : 'PENDING', outcome: null, durationMs: null };
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)));
      pause = Math.min(pause * 2, WAIT_POLL_MAX_MS);
    }
  }

  async function handlerList(actor: Actor, raw: HandlerFilter): Promise<HandlerInfo[]> {
    const filter = parseInput(handlerFilterSchema, raw);
    const all = await catalogue(ctx.db, actor, filter);
    return all.map((h) => handlerFor(actor, h));
  }

  return {
    /**
     * The handlers registered by live workers, by kind and name, each with its workers, cadence
     * and last outcome. Installation-wide; workspace data (a recoverable's last run and schedule)
     * is the caller's workspace's. Any role. Throws VALIDATION_FAILED.
     */
    async handlers(actor: Actor, raw: HandlerFilter = {}): Promise<HandlerInfo[]> {
      return handlerList(actor, raw);
    },

    /**
     * The catalogue as `handlers` answers it, for the live subscription (handlerCatalog), with
     * when it changes next by itself: the first live worker's staleness deadline. Any role.
     * Throws VALIDATION_FAILED.
     */
    async handlerCatalog(actor: Actor, raw: HandlerFilter = {}): Promise<HandlerCatalogSnapshot> {
      const [handlers, recheckInMs] = await Promise.all([handlerList(actor, raw), msUntilFirstWorkerStale(ctx.db)]);
      return { handlers, recheckInMs };
    },

    /**
     * Who sees the same catalogue as `actor`: a live subscription reads it once per audience
     * when it changes, not once per subscriber. The installation's details are shown to some
     * actors only, and the recoverables' runs and schedules are per workspace.
     */
    handlerCatalogAudience(actor: Actor): string {
      return `${seesInstallation(actor) ? 'installation' : 'tenant'}:${actor.workspaceId}`;
    },

    /**
     * The catalogue as a connection: by kind, then name, a page at a time, with its count. The
     * catalogue is as small as the code that registers it (live workers' handlers), so it is read
     * whole and paged here; a cursor is the (kind, name) of an entry, so a page goes on after it
     * even when that entry's workers have gone since. Any role. Throws VALIDATION_FAILED (a
     * cursor this list did not issue, a page size out of range).
     */
    async handlerConnection(actor: Actor, raw: HandlerFilter = {}, rawPage: PageInput = {}): Promise<Connection<HandlerInfo>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const sorted = (await handlerList(actor, raw)).sort(byCatalogueKey);
      const after = page.after ? decodeHandlerCursor(page.after) : undefined;
      const rest = after ? sorted.filter((h) => byCatalogueKey(h, after) > 0) : sorted;
      return pageConnection(rest.slice(0, size + 1), size, encodeHandlerCursor, async () => sorted.length);
    },

    /**
     * Makes an interval handler's next tick due now (an on-demand handler's only way to run); a
     * worker that has it runs it within its poll period. While it is running: refused (CONFLICT)
     * without `force`; with `force`, one more tick is queued right after the running one (ticks
     * never overlap). ADMIN only.
     *
     * With `wait`, answers once that tick's outcome is recorded, or when `waitTimeoutMs` (default
     * 30 s, at most 120 s) runs out (`tick.state` RUNNING or PENDING; the tick still runs). The
     * trigger commits first; the wait holds no transaction and no connection: it reads the
     * handler's one row now and then (a primary-key probe, from every 25 ms up to every 100 ms).
     * Not inside the caller's transaction (the trigger takes effect only when it commits).
     * Throws NOT_FOUND (no live worker has it), CONFLICT, FORBIDDEN, VALIDATION_FAILED.
     */
    async triggerHandler(actor: Actor, raw: TriggerHandlerInput): Promise<TriggerHandlerResult> {
      const { result, epoch, input } = await mutate(
        ctx,
        actor,
        { action: 'handler.trigger', role: 'ADMIN', input: raw, target: { type: 'Handler', id: raw?.name } },
        async (trx) => {
          const input = parseInput(triggerHandlerSchema, raw);
          if (input.wait && ctx.outer)
            throw ValidationError.at(['wait'], 'cannot wait inside your own transaction: the trigger takes effect only when you commit it');
          const [found] = await catalogue(trx, actor, { kind: 'INTERVAL', name: input.name });
          if (!found) throw new NoLiveWorkerError('INTERVAL', input.name, 'start a worker that registers it');
          const { rows } = await sql<{ owner: string | null; run_started_at: Date | null; epoch: string }>`
            select owner, run_started_at, epoch from interval_handlers where name = ${input.name} for update`.execute(trx);
          const row = rows[0];
          if (!row) throw new NotFoundError('Handler', input.name);
          if (row.owner !== null && !input.force) {
            throw new ConflictError(
              `interval handler ${input.name} is running (since ${row.run_started_at?.toISOString()}); trigger it with force to run it again right after`,
              {
                runningOn: seesInstallation(actor) ? row.owner : opaqueWorkerId(row.owner),
              },
            );
          }
          // Due now. A running tick keeps its owner, so the next one is taken only once it ends: never two at once.
          await sql`update interval_handlers set next_due_at = now(), updated_at = now() where name = ${input.name}`.execute(trx);
          const [handler] = await catalogue(trx, actor, { kind: 'INTERVAL', name: input.name });
          const outcome = row.owner !== null ? ('QUEUED_AFTER_RUNNING' as const) : ('DUE_NOW' as const);
          // The tick this trigger made due is the next take: an epoch above the one seen here.
          return { result: { handler: handlerFor(actor, handler!), outcome, tick: null }, epoch: BigInt(row.epoch), input };
        },
      );
      if (!input.wait) return result;
      const tick = await awaitTick(input.name, epoch, input.waitTimeoutMs ?? DEFAULT_TRIGGER_WAIT_MS);
      return {
        ...result,
        tick: tick.outcome && !seesInstallation(actor) ? { ...tick, outcome: { ...tick.outcome, message: null } } : tick,
      };
    },
  };
}

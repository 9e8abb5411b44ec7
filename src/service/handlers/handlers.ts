/**
 * The handler catalogue as a service (./catalogue.ts reads it), and triggering an
 * interval handler now (the only way an on-demand one runs), optionally waiting for that tick's
 * outcome. Triggering changes installation-level work, so it needs ADMIN.
 */
import type { Transaction } from 'kysely';
import { z } from 'zod';
import { HANDLER_NAME, HANDLER_NAME_RULE } from '../../db/handler-name.js';
import type { DB } from '../../db/types.js';
import { intervalTick, lockIntervalHandler, makeIntervalDueNow, msUntilFirstWorkerStale } from '../../db/repositories/handlers.js';
import { seesInstallation, type Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, NoLiveWorkerError, NotFoundError, ValidationError } from '../kernel/errors.js';
import {
  byCatalogueKey,
  catalogue,
  decodeHandlerCursor,
  encodeHandlerCursor,
  handlerFor,
  outcomeOf,
  type HandlerInfo,
  type HandlerOutcome,
} from './catalogue.js';
import { pageSchema, text, type PageInput } from '../kernel/inputs.js';
import { pageConnection, pageSize, type Connection } from '../kernel/pagination.js';
import { opaqueWorkerId } from '../kernel/models.js';

export type { HandlerCadence, HandlerInfo, HandlerKind, HandlerOutcome, IntervalState, RunScheduleState, WorkerInfo } from './catalogue.js';

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
  name: z.string().regex(HANDLER_NAME, HANDLER_NAME_RULE),
  /**
   * The triggered tick runs with `force` (its handler skips its own grace window). Without
   * `ifRunning`, it also queues one more tick while one runs, as it always has.
   */
  force: z.boolean().nullish(),
  /** Wait for the triggered tick's outcome (up to waitTimeoutMs) and return it. */
  wait: z.boolean().nullish(),
  waitTimeoutMs: z.number().int().min(1).max(MAX_TRIGGER_WAIT_MS).nullish(),
  /**
   * While a tick runs: REFUSE (default without force) throws CONFLICT; SKIP answers
   * ALREADY_RUNNING, with the running tick's start, and changes nothing; QUEUE (default with
   * force) queues one more tick right after it.
   */
  ifRunning: z.enum(['REFUSE', 'SKIP', 'QUEUE']).nullish(),
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

/** The catalogue as a live subscription reads it (../live/live.ts authorises nothing more: any key may read it). */
export interface HandlerCatalogSnapshot {
  handlers: HandlerInfo[];
  /** When to read it again even without a hint: the first live worker goes stale then (ms; null: no live worker). */
  recheckInMs: number | null;
}

export interface TriggerHandlerResult {
  handler: HandlerInfo;
  /**
   * DUE_NOW: its next tick is now; QUEUED_AFTER_RUNNING (force, while running): one more tick right
   * after the running one; ALREADY_RUNNING (`ifRunning: SKIP`, while running): nothing changed.
   */
  outcome: 'DUE_NOW' | 'QUEUED_AFTER_RUNNING' | 'ALREADY_RUNNING';
  /** QUEUED_AFTER_RUNNING and ALREADY_RUNNING: when the running tick started; null otherwise. */
  runningSince: Date | null;
  /** With `wait`: the triggered tick; null without. */
  tick: TriggeredTick | null;
}

/** What a trigger does while a tick runs: `ifRunning` when given, else QUEUE with force (as before it existed), else REFUSE. */
export function whileRunning(input: { force?: boolean | null; ifRunning?: 'REFUSE' | 'SKIP' | 'QUEUE' | null }) {
  return input.ifRunning ?? (input.force ? 'QUEUE' : 'REFUSE');
}

/**
 * The trigger's work inside its audited transaction: the handler must have a live worker; a
 * running tick refuses (CONFLICT), answers ALREADY_RUNNING (SKIP, nothing changed) or queues one
 * more (QUEUE); see whileRunning. With force, the tick made due runs forced. Answers the result
 * and the epoch seen (null: nothing made due).
 */
async function applyTrigger(
  trx: Transaction<DB>,
  actor: Actor,
  input: z.output<typeof triggerHandlerSchema>,
): Promise<{ result: TriggerHandlerResult; epoch: bigint | null }> {
  const [found] = await catalogue(trx, actor, { kind: 'INTERVAL', name: input.name });
  if (!found) throw new NoLiveWorkerError('INTERVAL', input.name, 'start a worker that registers it');
  const row = await lockIntervalHandler(trx, input.name);
  if (!row) throw new NotFoundError('Handler', input.name);
  const policy = whileRunning(input);
  if (row.owner !== null && policy === 'SKIP') {
    const [handler] = await catalogue(trx, actor, { kind: 'INTERVAL', name: input.name });
    const skipped = {
      handler: handlerFor(actor, handler!),
      outcome: 'ALREADY_RUNNING' as const,
      runningSince: row.run_started_at,
      tick: null,
    };
    return { result: skipped, epoch: null };
  }
  if (row.owner !== null && policy === 'REFUSE') {
    throw new ConflictError(
      `interval handler ${input.name} is running (since ${row.run_started_at?.toISOString()}); trigger it with ifRunning: QUEUE to run it again right after, or ifRunning: SKIP to be answered ALREADY_RUNNING`,
      {
        runningOn: seesInstallation(actor) ? row.owner : opaqueWorkerId(row.owner),
      },
    );
  }
  // Due now. A running tick keeps its owner, so the next one is taken only once it ends: never two at once.
  await makeIntervalDueNow(trx, input.name, input.force === true);
  const [handler] = await catalogue(trx, actor, { kind: 'INTERVAL', name: input.name });
  const outcome = row.owner !== null ? ('QUEUED_AFTER_RUNNING' as const) : ('DUE_NOW' as const);
  // The tick this trigger made due is the next take: an epoch above the one seen here.
  const runningSince = row.owner !== null ? row.run_started_at : null;
  return { result: { handler: handlerFor(actor, handler!), outcome, runningSince, tick: null }, epoch: BigInt(row.epoch) };
}

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
     * worker that has it runs it within its poll period. With `force`, that tick runs with
     * `force: true` in its context (the handler skips its own grace window). While a tick is
     * running, `ifRunning` decides: REFUSE (CONFLICT; the default without force), QUEUE (one more
     * tick right after the running one, never beside it; the default with force, as force alone
     * always did) or SKIP (answered ALREADY_RUNNING with the running tick's start; nothing
     * changes). ADMIN only.
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
          return { ...(await applyTrigger(trx, actor, input)), input };
        },
      );
      // Skipped: nothing was made due, so there is no tick to wait for.
      if (!input.wait || epoch === null) return result;
      const tick = await awaitTick(input.name, epoch, input.waitTimeoutMs ?? DEFAULT_TRIGGER_WAIT_MS);
      return {
        ...result,
        tick: tick.outcome && !seesInstallation(actor) ? { ...tick, outcome: { ...tick.outcome, message: null, extra: null } } : tick,
      };
    },
  };
}

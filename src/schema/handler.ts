import type {
  HandlerCadence,
  HandlerInfo,
  HandlerOutcome,
  IntervalState,
  RunScheduleState,
  TriggeredTick,
  TriggerHandlerResult,
  WorkerInfo,
} from '../service/handlers/handlers.js';
import { DEFAULT_TRIGGER_WAIT_MS, MAX_TRIGGER_WAIT_MS, triggerHandlerSchema } from '../service/handlers/handlers.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, zodInput } from './common.js';
import { RunRef, RunTriggerOutcomeEnum } from './run.js';

export const HandlerKindEnum = builder.enumType('HandlerKind', {
  description: 'What kind of code a handler is.',
  values: {
    HANDLER: { description: 'Serves HANDLER endpoints: runs executions of their jobs.' },
    RECOVERABLE: { description: 'A recoverable handler: long scans run as runs (see `triggerRun`), optionally on a schedule.' },
    INTERVAL: {
      description:
        'Plain periodic work, run on its own cadence (or, on demand, only when triggered with `triggerHandler`) by one of the workers that have it.',
    },
  } as const,
});

export const HandlerOutcomeStatusEnum = builder.enumType('HandlerOutcomeStatus', {
  description: 'How an interval tick ended.',
  values: {
    OK: { description: 'It returned normally.' },
    ERROR: { description: 'It did not: see `cause` and `message`.' },
  } as const,
});

export const HandlerErrorCauseEnum = builder.enumType('HandlerErrorCause', {
  description: 'Why an interval tick failed.',
  values: {
    HANDLER: { description: 'The handler threw.' },
    TIMEOUT: { description: 'It ran past its timeout; its abort signal was fired.' },
    CRASHED: { description: 'Its worker died (stopped heartbeating) while it ran.' },
  } as const,
});

export const TriggeredTickStateEnum = builder.enumType('TriggeredTickState', {
  description: 'Where the tick a `triggerHandler` with `wait` made due stood when the mutation answered.',
  values: {
    FINISHED: {
      description:
        'Its outcome is recorded: see `outcome`. A TIMEOUT is recorded at the deadline, while the handler may still be returning.',
    },
    RUNNING: {
      description:
        "A worker took it and it had not ended when the wait ran out; it goes on, and its outcome will show as the handler's `lastOutcome`.",
    },
    PENDING: { description: 'No worker had taken it when the wait ran out; it is still due.' },
  } as const,
});

export const TriggerHandlerOutcomeEnum = builder.enumType('TriggerHandlerOutcome', {
  description: 'What triggerHandler did.',
  values: {
    DUE_NOW: { description: 'Its next tick is due now; a worker that has it runs it within a second or so.' },
    QUEUED_AFTER_RUNNING: {
      description:
        'It was running (and `ifRunning: QUEUE` was given, or `force` without `ifRunning`): one more tick runs right after the running one ends.',
    },
    ALREADY_RUNNING: {
      description: 'It was running and `ifRunning: SKIP` was given: nothing changed; `runningSince` says since when.',
    },
  } as const,
});

export const TriggerIfRunningEnum = builder.enumType('TriggerIfRunning', {
  description: 'What triggerHandler does while a tick is running.',
  values: {
    REFUSE: { description: 'Refuse the trigger with CONFLICT (the default without `force`).' },
    SKIP: { description: "Change nothing and answer `outcome: ALREADY_RUNNING` with the running tick's start." },
    QUEUE: {
      description:
        'Queue one more tick right after the running one (never beside it): `outcome: QUEUED_AFTER_RUNNING` (the default with `force`).',
    },
  } as const,
});

export const HandlerCadenceRef = builder.objectRef<HandlerCadence>('HandlerCadence').implement({
  description: 'How often a handler runs: every `everyMs`, or on `cron` in `timezone`.',
  fields: (t) => ({
    everyMs: t.exposeFloat('everyMs', { nullable: true, description: 'Milliseconds between ticks; null for a cron cadence.' }),
    cron: t.exposeString('cron', { nullable: true, description: 'Five-field cron expression; null for an interval cadence.' }),
    timezone: t.exposeString('timezone', { nullable: true, description: 'IANA time zone of `cron`.' }),
  }),
});

export const WorkerInfoRef = builder.objectRef<WorkerInfo>('Worker').implement({
  description: 'A live worker process (it heartbeats; one that stops is dropped from the catalogue).',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The worker id (host:pid:random for installation admins; an opaque digest for everyone else).' }),
    host: t.exposeString('host', { nullable: true, description: 'Host name it runs on (installation admins only; null for others).' }),
    pid: t.exposeInt('pid', { nullable: true, description: 'Its process id on that host (installation admins only; null for others).' }),
    startedAt: t.field({ type: DateTimeScalar, description: 'When it started.', resolve: (w) => w.startedAt }),
    heartbeatAt: t.field({ type: DateTimeScalar, description: 'Its last heartbeat.', resolve: (w) => w.heartbeatAt }),
  }),
});

export const HandlerOutcomeRef = builder.objectRef<HandlerOutcome>('HandlerOutcome').implement({
  description: 'How the last tick of an interval handler ended.',
  fields: (t) => ({
    status: t.field({ type: HandlerOutcomeStatusEnum, description: 'OK or ERROR.', resolve: (o) => o.status }),
    count: t.exposeFloat('count', {
      nullable: true,
      description: 'OK: the count the handler returned (what it handled); null when it returned none.',
    }),
    cause: t.field({ type: HandlerErrorCauseEnum, nullable: true, description: 'ERROR: why.', resolve: (o) => o.cause }),
    message: t.exposeString('message', {
      nullable: true,
      description: 'ERROR: what went wrong (installation admins only: handler errors can carry anything; null for others).',
    }),
    extra: t.field({
      type: 'JSON',
      nullable: true,
      description:
        'OK: the JSON the handler returned beside its count (`{ count, extra }`), at most 16 KiB (a larger one reads `{ truncated: true, bytes }`); ' +
        'null when it returned none. Installation admins only (null for others), like `message`.',
      resolve: (o) => o.extra ?? null,
    }),
    startedAt: t.field({ type: DateTimeScalar, nullable: true, description: 'When the tick started.', resolve: (o) => o.startedAt }),
    finishedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When it ended (or was found crashed, or timed out).',
      resolve: (o) => o.finishedAt,
    }),
  }),
});

export const IntervalOverlapRef = builder.enumType('IntervalOverlap', {
  description: 'What an interval handler does with the cadence ticks that come due while a tick is still running.',
  values: {
    SKIP: {
      description: 'Skip them all: the next tick is the first period boundary after the running one ends (one warning in its worker log).',
    },
    QUEUE: { description: 'Run one tick right after the running one ends; the others are skipped.' },
  } as const,
});

export const IntervalStateRef = builder.objectRef<IntervalState>('IntervalState').implement({
  description: 'Where an interval handler stands (installation-wide).',
  fields: (t) => ({
    timeoutMs: t.exposeFloat('timeoutMs', { nullable: true, description: 'How long a tick may run before it is aborted as TIMEOUT.' }),
    nextDueAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the next tick is due; null for an on-demand handler not triggered.',
      resolve: (s) => s.nextDueAt,
    }),
    running: t.exposeBoolean('running', { description: 'Whether a tick is running now.' }),
    runningSince: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the running tick started.',
      resolve: (s) => s.runningSince,
    }),
    runningOn: t.exposeString('runningOn', { nullable: true, description: 'The worker running it (its `id`, as in `workers`).' }),
    okRuns: t.exposeFloat('okRuns', { description: 'Ticks that ended OK, all time.' }),
    errorRuns: t.exposeFloat('errorRuns', { description: 'Ticks that ended in ERROR, all time.' }),
    skippedTicks: t.exposeFloat('skippedTicks', {
      description:
        'Ticks skipped because the previous tick was still running when they came due, all time. Ticks never overlap: under `overlap: SKIP` ' +
        '(the default) all those due during a run are skipped and the next is the first period boundary after it; under `QUEUE` they coalesce ' +
        'into one, run right after it, and the others are counted here. A rising count means ticks run longer than the period. Always 0 on demand.',
    }),
    overlap: t.field({
      type: IntervalOverlapRef,
      description: 'What happens to the cadence ticks that come due while a tick is still running (set by the handler registration).',
      resolve: (s) => s.overlap,
    }),
    abandonedTicks: t.exposeFloat('abandonedTicks', {
      description:
        'Ticks whose handler ignored its signal past its timeout and its grace, all time: each was abandoned (its slot freed, so later ticks ran) ' +
        'while its handler went on running in its worker. Its TIMEOUT is its outcome; nothing it did later is recorded.',
    }),
    abandonedRunning: t.exposeInt('abandonedRunning', {
      description:
        'Abandoned handlers still running now (on workers that are alive): each still holds whatever it holds and may still act. ' +
        'Above 0 means a handler that does not stop when asked; its worker restarting ends it.',
    }),
    onDemand: t.exposeBoolean('onDemand', {
      description: 'Whether it has no cadence: it runs only when triggered (`triggerHandler`); `nextDueAt` is null until then.',
    }),
  }),
});

export const RunScheduleRef = builder.objectRef<RunScheduleState>('RunSchedule').implement({
  description: 'The schedule of a recoverable handler in your workspace: each tick triggers a run, idempotently.',
  fields: (t) => ({
    cadence: t.field({ type: HandlerCadenceRef, description: 'Its cron (with time zone) or interval.', resolve: (s) => s.cadence }),
    nextDueAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'The next tick; null when the cron has no further occurrence.',
      resolve: (s) => s.nextDueAt,
    }),
    ticks: t.exposeFloat('ticks', { description: 'Ticks so far.' }),
    ticksOnActiveRun: t.exposeFloat('ticksOnActiveRun', { description: 'Ticks that found a run already active, and so started nothing.' }),
    lastTickAt: t.field({ type: DateTimeScalar, nullable: true, description: 'When it last ticked.', resolve: (s) => s.lastTickAt }),
    lastTickOutcome: t.field({
      type: RunTriggerOutcomeEnum,
      nullable: true,
      description: 'What the last successful tick did.',
      resolve: (s) => s.lastTickOutcome,
    }),
    lastTickRunId: t.exposeID('lastTickRunId', {
      nullable: true,
      description: 'The run the last successful tick started, resumed or found active.',
    }),
    lastError: t.exposeString('lastError', { nullable: true, description: 'Why the last tick failed to trigger; null when it did not.' }),
    lastErrorAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When a tick last failed to trigger.',
      resolve: (s) => s.lastErrorAt,
    }),
  }),
});

export const HandlerRef = builder.objectRef<HandlerInfo>('Handler').implement({
  description:
    'A handler registered by live workers. The catalogue is installation-wide (handlers are code, not workspace data); ' +
    "a recoverable handler's last run and schedule are those of your workspace.",
  fields: (t) => ({
    kind: t.field({ type: HandlerKindEnum, description: 'HANDLER, RECOVERABLE or INTERVAL.', resolve: (h) => h.kind }),
    name: t.exposeString('name', { description: 'The name it is registered under.' }),
    cadence: t.field({
      type: HandlerCadenceRef,
      nullable: true,
      description:
        "INTERVAL: its period (null on demand). RECOVERABLE: its schedule in your workspace, if any. HANDLER: null (it runs its endpoints' jobs).",
      resolve: (h) => h.cadence,
    }),
    workers: t.field({ type: [WorkerInfoRef], description: 'The live workers that have it, oldest first.', resolve: (h) => h.workers }),
    alertsOptOut: t.boolean({
      description:
        'INTERVAL and RECOVERABLE: registered with `alertsOptOut` (by any of its live workers), so no alert rule fires about it. False for HANDLER.',
      resolve: (h) => h.alertsOptOut,
    }),
    lastOutcome: t.field({
      type: HandlerOutcomeRef,
      nullable: true,
      description: 'INTERVAL: how its last tick ended; null before the first.',
      resolve: (h) => h.lastOutcome,
    }),
    interval: t.field({
      type: IntervalStateRef,
      nullable: true,
      description: 'INTERVAL: next tick, whether one is running, totals.',
      resolve: (h) => h.interval,
    }),
    schedule: t.field({
      type: RunScheduleRef,
      nullable: true,
      description: 'RECOVERABLE: its schedule in your workspace, with its ticks; null when unscheduled here.',
      resolve: (h) => h.schedule,
    }),
    lastRun: t.field({
      type: RunRef,
      nullable: true,
      description: 'RECOVERABLE: its newest run in your workspace.',
      resolve: (h) => h.lastRun,
    }),
  }),
});

export const TriggeredTickRef = builder.objectRef<TriggeredTick>('TriggeredTick').implement({
  description: 'The tick a `triggerHandler` with `wait` made due, as the wait left it.',
  fields: (t) => ({
    state: t.field({
      type: TriggeredTickStateEnum,
      description: 'FINISHED (its outcome is below), RUNNING or PENDING (the wait ran out first).',
      resolve: (k) => k.state,
    }),
    outcome: t.field({
      type: HandlerOutcomeRef,
      nullable: true,
      description: 'FINISHED: how it ended (status, count, cause, message, start and finish); null otherwise.',
      resolve: (k) => k.outcome,
    }),
    durationMs: t.exposeFloat('durationMs', {
      nullable: true,
      description: 'FINISHED: milliseconds from its start to its outcome; null otherwise.',
    }),
  }),
});

export const TriggerHandlerPayloadRef = builder.objectRef<TriggerHandlerResult>('TriggerHandlerPayload').implement({
  description: 'The result of triggerHandler.',
  fields: (t) => ({
    handler: t.field({
      type: HandlerRef,
      description: 'The interval handler, as it stands after the trigger (before the tick ran).',
      resolve: (r) => r.handler,
    }),
    outcome: t.field({
      type: TriggerHandlerOutcomeEnum,
      description: 'Due now, queued after the running tick, or (with `ifRunning: SKIP`) skipped because a tick is running.',
      resolve: (r) => r.outcome,
    }),
    runningSince: t.field({
      type: DateTimeScalar,
      nullable: true,
      description:
        'When the tick that was running at the trigger started (QUEUED_AFTER_RUNNING, ALREADY_RUNNING); null when none was running.',
      resolve: (r) => r.runningSince,
    }),
    tick: t.field({
      type: TriggeredTickRef,
      nullable: true,
      description: 'With `wait: true`: the triggered tick and, once it finished, its outcome. Null without `wait`.',
      resolve: (r) => r.tick,
    }),
  }),
});

export const TriggerHandlerInputRef = builder.inputType('TriggerHandlerInput', {
  description: 'Run an interval handler now.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'The interval handler, as registered in the workers.' }),
    force: t.boolean({
      description:
        'Run the triggered tick forced: its handler receives `force: true` (skip its own grace window, do the work now). ' +
        'Without `ifRunning`, force also queues one more tick while one is running (`ifRunning: QUEUE`), as it always has. Default false.',
    }),
    wait: t.boolean({
      description:
        'Answer only once the triggered tick has its outcome (in `tick`), or when `waitTimeoutMs` runs out (the tick goes on). The trigger is committed first; ' +
        'the wait holds no transaction. Default false.',
    }),
    waitTimeoutMs: t.int({
      description: `With \`wait\`: the longest wait, in ms, 1 to ${MAX_TRIGGER_WAIT_MS}. Default ${DEFAULT_TRIGGER_WAIT_MS}.`,
    }),
    ifRunning: t.field({
      type: TriggerIfRunningEnum,
      description:
        'While a tick is running: REFUSE (CONFLICT; the default without `force`), SKIP (answer ALREADY_RUNNING with its start, change nothing) ' +
        'or QUEUE (one more tick right after it; the default with `force`).',
    }),
  }),
});
export const triggerHandlerValidation = zodInput(triggerHandlerSchema);

export const HandlerConnectionRef = connectionOf('Handler', HandlerRef, 'handler', 'by kind, then name');

export const HandlerCatalogRef = builder.objectRef<HandlerInfo[]>('HandlerCatalog').implement({
  description:
    'The handler catalogue as the handlerCatalog subscription pushes it: all of it each time (it is as small as the code that registers it), as `handlerConnection` would list it.',
  fields: (t) => ({
    handlers: t.field({
      type: [HandlerRef],
      description: 'Every handler registered by live workers (of the kind and name asked for), by kind, then name.',
      resolve: (handlers) => handlers,
    }),
  }),
});

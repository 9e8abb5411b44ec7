import type { Finding, Run, TriggerRunResult } from '../service/runs/runs.js';
import { triggerRunSchema } from '../service/runs/runs.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, JSONScalar, nodeId, zodInput } from './common.js';

export const RunStatusEnum = builder.enumType('RunStatus', {
  description: 'Lifecycle of a recoverable run.',
  values: {
    RUNNING: {
      description: 'A worker is scanning (or will pick it up shortly, or at `nextAttemptAt` while it waits to retry after a failure).',
    },
    CANCEL_REQUESTED: { description: 'Asked to stop; it pauses at its next safe boundary.' },
    PAUSED: {
      description: 'Stopped with its cursor kept: by a cancel, by its handler, or because its worker died. triggerRun resumes it.',
    },
    COMPLETED: { description: 'Finished its scan.' },
    FAILED: {
      description:
        'Its handler failed (returned failed, or threw with its retry budget spent); `error` says why. triggerRun with fromCheckpoint resumes it.',
    },
  } as const,
});

export const RunPauseKindEnum = builder.enumType('RunPauseKind', {
  description: 'Why a run is paused.',
  values: {
    CANCELLED: { description: 'An operator cancelled it (cancelRun). Its schedule leaves it paused; triggerRun resumes it.' },
    CRASHED: { description: 'Its worker stopped heartbeating (killed, host lost). triggerRun or its schedule resumes it.' },
    HANDLER: { description: 'Its handler returned paused on its own. triggerRun or its schedule resumes it.' },
  } as const,
});

export const SeverityEnum = builder.enumType('Severity', {
  description: 'How serious a finding is.',
  values: {
    INFO: { description: 'Worth knowing.' },
    WARNING: { description: 'Something is off.' },
    ERROR: { description: 'Something is wrong.' },
    DATA_LOSS: { description: 'Data was lost or would be.' },
  } as const,
});

export const FindingRef = builder
  .nodeRef<Finding>('Finding', {
    id: nodeId(
      'Opaque, stable identifier, meaningful in this workspace only; pass it as `after` (of `findings` or `runFindings`) to continue after this finding. Findings are listed in the order recorded.',
    ),
  })
  .implement({
    description: 'Something a run discovered. Unique per run, kind and resource: a replayed batch records nothing twice.',
    fields: (t) => ({
      kind: t.exposeString('kind', { description: 'What was found, e.g. "orphaned-blob".' }),
      severity: t.field({ type: SeverityEnum, description: 'How serious it is.', resolve: (f) => f.severity }),
      resourceId: t.exposeString('resourceId', { description: 'The thing it is about.' }),
      detail: t.field({ type: JSONScalar, description: 'Whatever the handler recorded with it.', resolve: (f) => f.detail }),
      createdAt: t.field({ type: DateTimeScalar, description: 'When it was recorded.', resolve: (f) => f.createdAt }),
    }),
  });

export const FindingCountRef = builder.objectRef<{ kind: string; severity: Finding['severity']; count: number }>('FindingCount').implement({
  description: 'How many findings of one kind and severity a run has.',
  fields: (t) => ({
    kind: t.exposeString('kind', { description: 'The kind.' }),
    severity: t.field({ type: SeverityEnum, description: 'The severity.', resolve: (c) => c.severity }),
    count: t.exposeInt('count', { description: 'How many.' }),
  }),
});

export const FindingPageRef = builder
  .objectRef<{ findings: Finding[]; nextCursor: string | null; counts: { kind: string; severity: Finding['severity']; count: number }[] }>(
    'FindingPage',
  )
  .implement({
    description:
      "A page of a run's findings, oldest first, with the run's counts per kind and severity. Superseded by FindingConnection (Run.findingConnection) and Run.findingCounts.",
    fields: (t) => ({
      nodes: t.field({ type: [FindingRef], description: 'The findings of this page.', resolve: (p) => p.findings }),
      nextCursor: t.exposeString('nextCursor', {
        nullable: true,
        description: 'Pass as `after` for the next page; null at the end.',
        deprecationReason: 'Use Run.findingConnection: pageInfo.endCursor and hasNextPage.',
      }),
      counts: t.field({
        type: [FindingCountRef],
        description: 'Counts per kind and severity over the whole run (not just this page).',
        resolve: (p) => p.counts,
      }),
    }),
  });

export const FindingConnectionRef = connectionOf('Finding', FindingRef, 'finding', 'oldest first (in the order recorded)');

export const RunRef = builder.nodeRef<Run>('Run', { id: nodeId() }).implement({
  description: 'One run of a recoverable handler: a long scan that checkpoints a cursor and can be paused, resumed and survive crashes.',
  // eslint-disable-next-line max-lines-per-function -- a list of field declarations with their descriptions
  fields: (t) => ({
    name: t.exposeString('name', { description: 'The recoverable handler it runs.' }),
    eventCursor: t.string({
      nullable: true,
      description:
        'Set only on the object cancelRun returns: the event cursor from just before that mutation changed anything; pass it as `after` to ' +
        'runEvents and every event it caused arrives, none twice. null when the object was read by a query.',
      resolve: (r) => r.eventCursor ?? null,
    }),
    status: t.field({ type: RunStatusEnum, description: 'Where it is in its lifecycle.', resolve: (r) => r.status }),
    params: t.field({ type: JSONScalar, description: 'The parameters it was triggered with.', resolve: (r) => r.params }),
    cursor: t.exposeString('cursorBase64', {
      nullable: true,
      description: 'The last checkpointed cursor, base64; null before the first checkpoint.',
    }),
    stats: t.field({
      type: JSONScalar,
      description: 'Statistics accumulated over all checkpoints (numbers add up).',
      resolve: (r) => r.stats,
    }),
    processed: t.exposeFloat('processed', { description: 'Items processed so far, over all resumptions.' }),
    total: t.exposeFloat('total', { nullable: true, description: 'Items in all, when the handler knows.' }),
    progress: t.exposeFloat('progress', { nullable: true, description: 'processed / total, from 0 to 1; null while total is unknown.' }),
    startedAt: t.field({
      type: DateTimeScalar,
      description: 'When the run started; fixed across resumptions.',
      resolve: (r) => r.startedAt,
    }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When it last changed.', resolve: (r) => r.updatedAt }),
    heartbeatAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: "Its worker's last sign of life.",
      resolve: (r) => r.heartbeatAt,
    }),
    finishedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When it completed or failed.',
      resolve: (r) => r.finishedAt,
    }),
    error: t.exposeString('error', {
      nullable: true,
      description: 'Why it failed; while it waits to retry (`waitingToRetry`), why its last attempt failed.',
    }),
    retryAttempt: t.exposeInt('retryAttempt', {
      description:
        'Retries spent since the run last advanced its cursor, each after its handler threw; a checkpoint that moves the cursor resets it to 0.',
    }),
    retryBudget: t.exposeInt('retryBudget', {
      nullable: true,
      description: 'The retries its handler allows after a throw (set where the handler is registered); null before its first failure.',
    }),
    waitingToRetry: t.exposeBoolean('waitingToRetry', {
      description:
        'Its handler threw and the run waits, RUNNING but held by no worker, to be tried again from its last checkpoint at `nextAttemptAt`.',
    }),
    nextAttemptAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description:
        'While it waits after a failure (its handler threw, or its database was lost), when it may be taken again; null otherwise.',
      resolve: (r) => r.nextAttemptAt,
    }),
    pauseReason: t.exposeString('pauseReason', { nullable: true, description: 'Why it is paused.' }),
    pauseKind: t.field({
      type: RunPauseKindEnum,
      nullable: true,
      description: 'Why it is paused, as a value to switch on; null unless PAUSED.',
      resolve: (r) => r.pauseKind,
    }),
    findingConnection: t.field({
      type: FindingConnectionRef,
      description: 'What the run found, oldest first (in the order recorded), a page at a time, by kind and severity.',
      args: {
        first: t.arg.int({ description: 'How many items to return, from 1 to 100. Default 20.' }),
        after: t.arg.string({
          description: "Return the findings after this cursor (`pageInfo.endCursor` of the previous page, or a finding's id).",
        }),
        kind: t.arg.string({ description: 'Only findings of this kind.' }),
        severity: t.arg({ type: SeverityEnum, description: 'Only findings of this severity.' }),
      },
      resolve: (r, { first, after, ...filter }, ctx) => ctx.service.findingConnection(ctx.actor, r.id, filter, { first, after }),
    }),
    findingCounts: t.field({
      type: [FindingCountRef],
      description: 'How many findings the run has, per kind and severity (all of them, not a page).',
      resolve: (r, _args, ctx) => ctx.service.findingCounts(ctx.actor, r.id),
    }),
    findings: t.field({
      type: FindingPageRef,
      description: 'What the run found, oldest first.',
      deprecationReason: 'Use findingConnection (a Relay connection like every other list, with totalCount) and findingCounts.',
      args: {
        kind: t.arg.string({ description: 'Only findings of this kind.' }),
        severity: t.arg({ type: SeverityEnum, description: 'Only findings of this severity.' }),
        first: t.arg.int({ description: 'How many, 1 to 500. Default 100.' }),
        after: t.arg.string({ description: '`nextCursor` of the previous page.' }),
      },
      resolve: (r, args, ctx) => ctx.service.findings(ctx.actor, r.id, args),
    }),
  }),
});

export const RunConnectionRef = connectionOf('Run', RunRef, 'run');

export const RunTriggerOutcomeEnum = builder.enumType('RunTriggerOutcome', {
  description: 'What a trigger of a recoverable handler did.',
  values: {
    STARTED: { description: 'A fresh run started.' },
    RESUMED: { description: 'A paused run (or, with fromCheckpoint, a failed one) resumed from its cursor.' },
    ACTIVE: { description: 'A run was already active: nothing was started.' },
    HELD: { description: 'The run is paused by an operator (cancelRun): a schedule leaves it paused; only triggerRun resumes it.' },
  } as const,
});

export const TriggerRunPayloadRef = builder.objectRef<TriggerRunResult>('TriggerRunPayload').implement({
  description: 'The result of triggerRun.',
  fields: (t) => ({
    run: t.field({ type: RunRef, description: 'The run: new, resumed, or the one already active.', resolve: (r) => r.run }),
    result: t.field({
      type: RunTriggerOutcomeEnum,
      description:
        'STARTED, RESUMED (a paused run, however it was paused, continues from its cursor) or ACTIVE (already running; returned as it is).',
      resolve: (r) => r.outcome,
    }),
    outcome: t.exposeString('outcome', {
      description: 'The same value as `result`, as a string.',
      deprecationReason: 'Use `result`: the same value, typed as the RunTriggerOutcome enum.',
    }),
    eventCursor: t.string({
      description:
        'The event cursor from just before this trigger changed anything: pass it as `after` to runEvents ' +
        'and every event it caused arrives, none twice, however late the subscription starts.',
      resolve: (r) => r.eventCursor!,
    }),
  }),
});

export const TriggerRunInputRef = builder.inputType('TriggerRunInput', {
  description: 'Run a recoverable handler.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'The recoverable handler, as registered in the workers.' }),
    params: t.field({
      type: JSONScalar,
      description: "Parameters for a fresh run (checked by the handler's schema). Ignored when resuming.",
    }),
    force: t.boolean({
      description:
        'Queue the run even when no live worker has registered the handler (it runs once one does). Without it, such a trigger is refused with NOT_FOUND ' +
        '(`extensions.reason: NO_LIVE_WORKER`). Default false.',
    }),
    fromCheckpoint: t.boolean({
      description:
        'When no run of the handler is live and its newest run FAILED, resume that run from its last checkpoint (result RESUMED, its retry budget whole) ' +
        'instead of starting afresh; otherwise as without it. Default false.',
    }),
  }),
});
export const triggerRunValidation = zodInput(triggerRunSchema);

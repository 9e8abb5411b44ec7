/**
 * The payloads of live subscriptions. Every event carries a `cursor`: subscribe again with
 * `after: <cursor of the last event you received>` and the stream continues right after it,
 * with nothing missed and nothing twice (events are kept for the retention window).
 */
import type { LiveEvent } from '../subscriptions/live-feeds.js';
import { builder } from './builder.js';
import { DateTimeScalar } from './common.js';
import { ExecutionRef, ExecutionStatusEnum } from './execution.js';
import { JobRef, JobStatusEnum } from './job.js';
import { RunRef, RunStatusEnum } from './run.js';

type Status<E> = E extends { $inferType: infer T } ? T : never;

export const ExecutionEventRef = builder.objectRef<LiveEvent>('ExecutionEvent').implement({
  description:
    'An execution changed state: created (PENDING), claimed (RUNNING), retried (back to PENDING), or finished; ' +
    'or, a cron occurrence written ahead and withdrawn before its time, CANCELLED from PENDING with no attempt.',
  fields: (t) => ({
    cursor: t.exposeString('cursor', {
      description: 'Opaque, meaningful in this workspace only: pass it as `after` to resume the stream right after this event.',
    }),
    executionId: t.exposeID('subjectId', { description: 'The execution.' }),
    jobId: t.field({ type: 'ID', description: 'Its job.', resolve: (e) => e.jobId! }),
    endpointId: t.field({ type: 'ID', description: 'Its endpoint.', resolve: (e) => e.endpointId! }),
    status: t.field({
      type: ExecutionStatusEnum,
      description: 'The status it moved to.',
      resolve: (e) => e.status as Status<typeof ExecutionStatusEnum>,
    }),
    previousStatus: t.field({
      type: ExecutionStatusEnum,
      nullable: true,
      description: 'The status it left; null when the execution was created.',
      resolve: (e) => e.previousStatus as Status<typeof ExecutionStatusEnum> | null,
    }),
    attemptCount: t.int({ description: 'Attempts made when it changed.', resolve: (e) => e.attemptCount ?? 0 }),
    occurredAt: t.field({ type: DateTimeScalar, description: 'When the change was written.', resolve: (e) => e.occurredAt }),
    executionNow: t.field({
      type: ExecutionRef,
      description:
        'The execution as it is now, read when asked for: in a burst it has often moved on since this event, and each read costs a query. ' +
        "The event's own fields are the state at the event's moment. NOT_FOUND once the execution is gone: a cron occurrence " +
        'withdrawn before its time (its last event is CANCELLED from PENDING), or history pruned.',
      resolve: (e, _a, ctx) => ctx.service.execution(ctx.actor, e.subjectId),
    }),
    execution: t.field({
      type: ExecutionRef,
      description: 'The execution as it is now (read when asked for; it may have moved on since this event).',
      deprecationReason:
        "Use `executionNow` (the same current row, named for what it is), or the event's own fields for the state at its moment.",
      resolve: (e, _a, ctx) => ctx.service.execution(ctx.actor, e.subjectId),
    }),
  }),
});

export const JobEventRef = builder.objectRef<LiveEvent>('JobEvent').implement({
  description: 'A job was created, paused, resumed or retired.',
  fields: (t) => ({
    cursor: t.exposeString('cursor', {
      description: 'Opaque, meaningful in this workspace only: pass it as `after` to resume the stream right after this event.',
    }),
    jobId: t.exposeID('subjectId', { description: 'The job.' }),
    endpointId: t.field({ type: 'ID', description: 'Its endpoint.', resolve: (e) => e.endpointId! }),
    status: t.field({
      type: JobStatusEnum,
      description: 'The status it moved to.',
      resolve: (e) => e.status as Status<typeof JobStatusEnum>,
    }),
    previousStatus: t.field({
      type: JobStatusEnum,
      nullable: true,
      description: 'The status it left; null when the job was created.',
      resolve: (e) => e.previousStatus as Status<typeof JobStatusEnum> | null,
    }),
    occurredAt: t.field({ type: DateTimeScalar, description: 'When the change was written.', resolve: (e) => e.occurredAt }),
    jobNow: t.field({
      type: JobRef,
      description:
        "The job as it is now, read when asked for (it may have moved on since this event; the event's own fields are its state then).",
      resolve: (e, _a, ctx) => ctx.service.job(ctx.actor, e.subjectId),
    }),
    job: t.field({
      type: JobRef,
      description: 'The job as it is now.',
      deprecationReason: 'Use `jobNow` (the same current row, named for what it is).',
      resolve: (e, _a, ctx) => ctx.service.job(ctx.actor, e.subjectId),
    }),
  }),
});

export const RunEventRef = builder.objectRef<LiveEvent>('RunEvent').implement({
  description: 'A recoverable run started or changed status (for progress within a run, subscribe to runProgress).',
  fields: (t) => ({
    cursor: t.exposeString('cursor', {
      description: 'Opaque, meaningful in this workspace only: pass it as `after` to resume the stream right after this event.',
    }),
    runId: t.exposeID('subjectId', { description: 'The run.' }),
    name: t.string({ description: 'The recoverable handler it runs.', resolve: (e) => e.name ?? '' }),
    status: t.field({
      type: RunStatusEnum,
      description: 'The status it moved to.',
      resolve: (e) => e.status as Status<typeof RunStatusEnum>,
    }),
    previousStatus: t.field({
      type: RunStatusEnum,
      nullable: true,
      description: 'The status it left; null when the run started.',
      resolve: (e) => e.previousStatus as Status<typeof RunStatusEnum> | null,
    }),
    occurredAt: t.field({ type: DateTimeScalar, description: 'When the change was written.', resolve: (e) => e.occurredAt }),
    runNow: t.field({
      type: RunRef,
      description:
        "The run as it is now, read when asked for (it may have moved on since this event; the event's own fields are its state then).",
      resolve: (e, _a, ctx) => ctx.service.run(ctx.actor, e.subjectId),
    }),
    run: t.field({
      type: RunRef,
      description: 'The run as it is now.',
      deprecationReason: 'Use `runNow` (the same current row, named for what it is).',
      resolve: (e, _a, ctx) => ctx.service.run(ctx.actor, e.subjectId),
    }),
  }),
});

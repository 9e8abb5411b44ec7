import type { EndpointStatusCounts, ExecutionStats, MinuteBucket } from '../service/jobs/stats.js';
import { builder } from './builder.js';
import { CAPPED_MS_NOTE, cappedMs, DateTimeScalar } from './common.js';

export const EndpointStatusCountsRef = builder.objectRef<EndpointStatusCounts>('EndpointStatusCounts').implement({
  description: "One endpoint's executions: live now, in the dead-letter queue, and ended within the window.",
  fields: (t) => ({
    endpointId: t.exposeID('endpointId', { description: 'The endpoint.' }),
    endpointName: t.exposeString('endpointName', { description: "The endpoint's name." }),
    internal: t.exposeBoolean('internal', {
      description: "Whether it is an INTERNAL endpoint: jobgate's own work (alert delivery, the reaper, retention), not the workspace's.",
    }),
    pending: t.exposeInt('pending', { description: 'PENDING executions now (due or waiting for their time or a retry).' }),
    running: t.exposeInt('running', { description: 'RUNNING executions now.' }),
    failed: t.exposeInt('failed', { description: 'FAILED executions, whenever they failed: the dead-letter queue.' }),
    pausedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the endpoint was paused (its executions wait until resumeEndpoint); null when it is not paused.',
      resolve: (c) => c.pausedAt,
    }),
    heldUntil: t.field({
      type: DateTimeScalar,
      nullable: true,
      description:
        "Until when the endpoint's target holds it (it answered 429 or 503 with Retry-After: none of its executions starts before then); null when no hold is in force.",
      resolve: (c) => c.heldUntil,
    }),
    succeededInWindow: t.exposeInt('succeededInWindow', { description: 'Executions that ended SUCCEEDED within the window.' }),
    failedInWindow: t.exposeInt('failedInWindow', { description: 'Executions that ended FAILED within the window.' }),
    cancelledInWindow: t.exposeInt('cancelledInWindow', { description: 'Executions that ended CANCELLED within the window.' }),
  }),
});

export const MinuteBucketRef = builder.objectRef<MinuteBucket>('ExecutionMinute').implement({
  description: 'One minute of execution activity.',
  fields: (t) => ({
    minute: t.field({ type: DateTimeScalar, description: 'The start of the minute.', resolve: (b) => b.minute }),
    succeeded: t.exposeInt('succeeded', { description: 'Executions that ended SUCCEEDED in this minute (throughput).' }),
    failed: t.exposeInt('failed', { description: 'Executions that ended FAILED in this minute (their last attempt failed).' }),
    started: t.exposeInt('started', {
      description: 'Executions whose latest attempt started in this minute (one that was retried counts at its latest attempt).',
    }),
    latencyP50Ms: t.int({
      nullable: true,
      description:
        'Median enqueue-to-start latency of those attempts (when it started minus when it was due: its scheduled time, or the end of its retry backoff), in milliseconds; null when there were none.' +
        CAPPED_MS_NOTE,
      resolve: (m) => cappedMs(m.latencyP50Ms),
    }),
    latencyP95Ms: t.int({
      nullable: true,
      description: '95th percentile of that latency, in milliseconds; null when there were none.' + CAPPED_MS_NOTE,
      resolve: (m) => cappedMs(m.latencyP95Ms),
    }),
  }),
});

export const ExecutionStatsRef = builder.objectRef<ExecutionStats>('ExecutionStats').implement({
  description:
    "The workspace's executions at a glance, for an overview screen: per endpoint, per minute of a recent window, and the live workers.",
  fields: (t) => ({
    windowMinutes: t.exposeInt('windowMinutes', { description: 'The window, in minutes, ending now.' }),
    byEndpoint: t.field({
      type: [EndpointStatusCountsRef],
      description:
        "The workspace's own (USER) endpoints with live, dead-letter or recently ended executions, by name. jobgate's INTERNAL endpoints are in `internalEndpoints`.",
      resolve: (s) => s.byEndpoint,
    }),
    internalEndpoints: t.field({
      type: [EndpointStatusCountsRef],
      description:
        "jobgate's own INTERNAL endpoints (alert delivery, the reaper, retention) with live, dead-letter or recently ended executions, by name: apart from the workspace's counts.",
      resolve: (s) => s.internalEndpoints,
    }),
    perMinute: t.field({
      type: [MinuteBucketRef],
      description:
        "One entry per minute of the window, oldest first; the last is the current, partial minute. The workspace's executions only: those on INTERNAL endpoints are not counted.",
      resolve: (s) => s.perMinute,
    }),
    workersAlive: t.exposeInt('workersAlive', { description: 'Worker processes heartbeating now (installation-wide).' }),
  }),
});

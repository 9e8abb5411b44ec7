/**
 * `viewerCan` on endpoints, jobs, executions, runs and batches: which actions the calling key may take, answered by
 * the service from the same rules its mutations enforce (src/service/access/permissions.ts), so a
 * client shows only the buttons the server would accept.
 */
import type {
  BatchPermissions,
  EndpointPermissions,
  ExecutionPermissions,
  JobPermissions,
  RunPermissions,
} from '../service/access/permissions.js';
import { BatchRef } from './batch.js';
import { EndpointRef } from './endpoint.js';
import { builder } from './builder.js';
import { ExecutionRef } from './execution.js';
import { JobRef } from './job.js';
import { RunRef } from './run.js';

const NOTE =
  'By the rules the mutation enforces for your key (role, who created it, INTERNAL, retired); the state of the moment (e.g. a job already running) still decides.';

export const JobViewerCanRef = builder.objectRef<JobPermissions>('JobViewerCan').implement({
  description: `Which actions on a job your key may take. ${NOTE}`,
  fields: (t) => ({
    trigger: t.exposeBoolean('trigger', { description: 'triggerJob: run it now (any OPERATOR, unless the job is INTERNAL or retired).' }),
    pause: t.exposeBoolean('pause', { description: 'pauseJob (an OPERATOR key: only jobs it created).' }),
    resume: t.exposeBoolean('resume', { description: 'resumeJob (an OPERATOR key: only jobs it created).' }),
    update: t.exposeBoolean('update', { description: 'updateJob (an OPERATOR key: only jobs it created).' }),
    cancel: t.exposeBoolean('cancel', { description: 'cancelJob (an OPERATOR key: only jobs it created).' }),
  }),
});

export const EndpointViewerCanRef = builder.objectRef<EndpointPermissions>('EndpointViewerCan').implement({
  description: `Which actions on an endpoint your key may take. ${NOTE}`,
  fields: (t) => ({
    update: t.exposeBoolean('update', {
      description: 'updateEndpoint (an OPERATOR key: only endpoints it registered; none once archived).',
    }),
    archive: t.exposeBoolean('archive', { description: 'archiveEndpoint (an OPERATOR key: only endpoints it registered).' }),
    pause: t.exposeBoolean('pause', { description: 'pauseEndpoint (an OPERATOR key: only endpoints it registered).' }),
    resume: t.exposeBoolean('resume', { description: 'resumeEndpoint (an OPERATOR key: only endpoints it registered).' }),
  }),
});

export const ExecutionViewerCanRef = builder.objectRef<ExecutionPermissions>('ExecutionViewerCan').implement({
  description: `Which actions on an execution your key may take. ${NOTE}`,
  fields: (t) => ({
    retry: t.exposeBoolean('retry', {
      description: 'retryExecution, once it is FAILED (any OPERATOR, unless its job is INTERNAL or retired).',
    }),
    cancel: t.exposeBoolean('cancel', {
      description: 'cancelExecution, while it is PENDING or RUNNING (an OPERATOR key: only executions or jobs it created).',
    }),
  }),
});

export const RunViewerCanRef = builder.objectRef<RunPermissions>('RunViewerCan').implement({
  description: `Which actions on a run your key may take. ${NOTE}`,
  fields: (t) => ({
    cancel: t.exposeBoolean('cancel', { description: 'cancelRun, while it is live (an OPERATOR key: only runs it triggered).' }),
    resume: t.exposeBoolean('resume', {
      description:
        'triggerRun, which resumes it while it is PAUSED, and with fromCheckpoint while it is FAILED and its newest (any OPERATOR).',
    }),
  }),
});

builder.objectFields(JobRef, (t) => ({
  viewerCan: t.field({
    type: JobViewerCanRef,
    description: 'Which actions on this job your key may take (the rules its mutations enforce), to show only those.',
    resolve: (j, _a, ctx) => ctx.service.jobPermissions(ctx.actor, j.id),
  }),
}));

builder.objectFields(EndpointRef, (t) => ({
  viewerCan: t.field({
    type: EndpointViewerCanRef,
    description: 'Which actions on this endpoint your key may take (the rules its mutations enforce), to show only those.',
    resolve: (e, _a, ctx) => ctx.service.endpointPermissions(ctx.actor, e.id),
  }),
}));

builder.objectFields(ExecutionRef, (t) => ({
  viewerCan: t.field({
    type: ExecutionViewerCanRef,
    description: 'Which actions on this execution your key may take (the rules its mutations enforce), to show only those.',
    resolve: (e, _a, ctx) => ctx.service.executionPermissions(ctx.actor, e.id),
  }),
}));

builder.objectFields(RunRef, (t) => ({
  viewerCan: t.field({
    type: RunViewerCanRef,
    description: 'Which actions on this run your key may take (the rules its mutations enforce), to show only those.',
    resolve: (r, _a, ctx) => ctx.service.runPermissions(ctx.actor, r.id),
  }),
}));

export const BatchViewerCanRef = builder.objectRef<BatchPermissions>('BatchViewerCan').implement({
  description: `Which actions on a batch your key may take. ${NOTE}`,
  fields: (t) => ({
    close: t.exposeBoolean('close', { description: 'closeBatch, while it is open (an OPERATOR key: only batches it created).' }),
    cancel: t.exposeBoolean('cancel', { description: 'cancelBatch, until it completes (an OPERATOR key: only batches it created).' }),
    addMember: t.exposeBoolean('addMember', {
      description: 'createJob with its batchId, while it is open (an OPERATOR key: only batches it created).',
    }),
  }),
});

builder.objectFields(BatchRef, (t) => ({
  viewerCan: t.field({
    type: BatchViewerCanRef,
    description: 'Which actions on this batch your key may take (the rules its mutations enforce), to show only those.',
    resolve: (b, _a, ctx) => ctx.service.batchPermissions(ctx.actor, b.id),
  }),
}));

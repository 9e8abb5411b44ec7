import type { PruneHistoryResult } from '../service/retention/prune-now.js';
import type { WorkspaceRetention } from '../service/retention/settings.js';
import { builder } from './builder.js';
import { WorkspaceRef } from './workspace.js';

type Overrides = WorkspaceRetention['overrides'];

export const RetentionOverridesRef = builder.objectRef<Overrides>('RetentionOverrides').implement({
  description: "The retention windows a workspace set itself; null where it follows the installation's default.",
  fields: (t) => ({
    executionsDays: t.int({
      nullable: true,
      description: 'Days SUCCEEDED and CANCELLED executions are kept, or null.',
      resolve: (o) => o.executionsDays,
    }),
    failedExecutionsDays: t.int({
      nullable: true,
      description: 'Days FAILED executions are kept, or null.',
      resolve: (o) => o.failedExecutionsDays,
    }),
    auditDays: t.int({ nullable: true, description: 'Days audit log entries are kept, or null.', resolve: (o) => o.auditDays }),
    runsDays: t.int({
      nullable: true,
      description: 'Days finished runs and their findings are kept, or null.',
      resolve: (o) => o.runsDays,
    }),
    eventsHours: t.int({ nullable: true, description: 'Hours live events are kept for replay, or null.', resolve: (o) => o.eventsHours }),
  }),
});

export const WorkspaceRetentionRef = builder.objectRef<WorkspaceRetention>('WorkspaceRetention').implement({
  description:
    'How long the workspace keeps its finished history before it is pruned, as in effect now. Days of 0 keep that history forever. ' +
    'Live rows (pending or running executions, runs not finished) are never pruned, nor the newest `keepPerJob` executions of each recurring job, whatever their age.',
  fields: (t) => ({
    executionsDays: t.exposeInt('executionsDays', {
      description: 'Days SUCCEEDED and CANCELLED executions (with their attempts) are kept after they finished.',
    }),
    failedExecutionsDays: t.exposeInt('failedExecutionsDays', {
      description: 'Days FAILED executions (with their attempts) are kept after they finished.',
    }),
    auditDays: t.exposeInt('auditDays', { description: 'Days audit log entries are kept.' }),
    runsDays: t.exposeInt('runsDays', {
      description: 'Days COMPLETED and FAILED runs (with their findings) are kept after they finished.',
    }),
    eventsHours: t.exposeInt('eventsHours', {
      description: 'Hours live events are kept; a subscription cannot replay (`after`) from before them (CURSOR_EXPIRED).',
    }),
    keepPerJob: t.exposeInt('keepPerJob', {
      description:
        "The newest executions of each recurring (cron) job kept whatever their age (the installation's setting), so its page never goes blank. " +
        'A one-off or retired job goes whole, with its executions, once they are all past their window.',
    }),
    overrides: t.field({
      type: RetentionOverridesRef,
      description: "What the workspace set itself; the rest follows the installation's defaults.",
      resolve: (r) => r.overrides,
    }),
  }),
});

export const SetRetentionInputRef = builder.inputType('SetRetentionInput', {
  description:
    "The workspace's own retention windows. An omitted field stays as it is; null returns it to the installation's default; 0 days keeps that history forever.",
  fields: (t) => ({
    executionsDays: t.int({ description: 'Days SUCCEEDED and CANCELLED executions are kept (0 to 36,500).' }),
    failedExecutionsDays: t.int({ description: 'Days FAILED executions are kept (0 to 36,500).' }),
    auditDays: t.int({ description: 'Days audit log entries are kept (0 to 36,500).' }),
    runsDays: t.int({ description: 'Days finished runs and their findings are kept (0 to 36,500).' }),
    eventsHours: t.int({ description: 'Hours live events are kept for replay (1 to 876,000).' }),
  }),
});

builder.objectField(WorkspaceRef, 'retention', (t) =>
  t.field({
    type: WorkspaceRetentionRef,
    description: 'How long this workspace keeps its finished history (setRetention changes it).',
    resolve: (_w, _args, ctx) => ctx.service.retention(ctx.actor),
  }),
);

export const PruneHistoryInputRef = builder.inputType('PruneHistoryInput', {
  description: 'How much an on-demand prune may do in one call.',
  fields: (t) => ({
    maxBatches: t.int({
      description:
        "Most pruning batches this call runs (1 to 10,000; default 100), each one short transaction of at most the installation's batch size.",
    }),
  }),
});

export const PrunedCountsRef = builder.objectRef<PruneHistoryResult['removed']>('PrunedCounts').implement({
  description: 'Rows an on-demand prune deleted, per kind of history.',
  fields: (t) => ({
    jobs: t.exposeInt('jobs', { description: 'Finished one-off jobs and retired jobs, deleted whole.' }),
    executions: t.exposeInt('executions', { description: 'Executions (those of deleted jobs included).' }),
    attempts: t.exposeInt('attempts', { description: 'Attempts, deleted with their executions.' }),
    runs: t.exposeInt('runs', { description: 'Finished recoverable runs.' }),
    findings: t.exposeInt('findings', { description: 'Findings, deleted with their runs.' }),
    auditLog: t.exposeInt('audit_log', { description: 'Audit log entries.' }),
    alertNotifications: t.exposeInt('alert_notifications', { description: 'Alert notifications.' }),
    events: t.exposeInt('events', { description: 'Live events past their window (subscriptions can no longer replay them).' }),
    batches: t.exposeInt('batches', { description: 'Completed batches whose jobs were all deleted.' }),
  }),
});

export const PruneHistoryPayloadRef = builder.objectRef<PruneHistoryResult>('PruneHistoryPayload').implement({
  description: 'What an on-demand prune removed.',
  fields: (t) => ({
    removed: t.field({ type: PrunedCountsRef, description: 'Rows deleted, per kind of history.', resolve: (r) => r.removed }),
    complete: t.exposeBoolean('complete', {
      description:
        'Whether everything past its window was looked at. False when the call stopped at `maxBatches` or a worker was pruning part of the history at that moment: call again.',
    }),
  }),
});

import { builder } from '../schema/builder.js';
import { PruneHistoryInputRef, PruneHistoryPayloadRef, SetRetentionInputRef, WorkspaceRetentionRef } from '../schema/retention.js';

builder.mutationFields((t) => ({
  setRetention: t.field({
    type: WorkspaceRetentionRef,
    description:
      'Sets how long your workspace keeps its finished history (ADMIN only; audited). Pruning uses the new windows from its next pass.',
    args: {
      input: t.arg({ type: SetRetentionInputRef, required: true, description: 'The windows to set; omitted ones stay as they are.' }),
    },
    resolve: (_root, { input }, ctx) => ctx.service.setRetention(ctx.actor, input),
  }),
  pruneHistory: t.field({
    type: PruneHistoryPayloadRef,
    description:
      "Prunes your workspace's finished history now, to the windows in effect, as the background pruner would (ADMIN only; audited): " +
      'live rows are never touched; each batch is one short transaction. Answers what was removed.',
    args: {
      input: t.arg({ type: PruneHistoryInputRef, required: false, description: 'How much this call may do; all defaults when omitted.' }),
    },
    resolve: (_root, { input }, ctx) => ctx.service.pruneHistory(ctx.actor, input ?? {}),
  }),
}));

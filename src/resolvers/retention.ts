import { builder } from '../schema/builder.js';
import { SetRetentionInputRef, WorkspaceRetentionRef } from '../schema/retention.js';

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
}));

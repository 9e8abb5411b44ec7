import { builder } from '../schema/builder.js';
import { updateWorkspaceValidation, UpdateWorkspaceInputRef, WorkspaceRef } from '../schema/workspace.js';

builder.queryFields((t) => ({
  workspace: t.field({
    type: WorkspaceRef,
    description: 'The workspace of your credentials.',
    resolve: (_root, _args, ctx) => ctx.service.workspace(ctx.actor),
  }),
}));

builder.mutationFields((t) => ({
  updateWorkspace: t.field({
    type: WorkspaceRef,
    description: 'Changes the workspace of your credentials: its name, and its cap on attempts in flight (concurrencyLimit). ADMIN only.',
    args: {
      input: t.arg({ type: UpdateWorkspaceInputRef, required: true, description: 'The changes.', validate: updateWorkspaceValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.updateWorkspace(ctx.actor, args.input as never),
  }),
}));

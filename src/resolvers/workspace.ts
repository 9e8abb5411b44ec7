import { builder } from '../schema/builder.js';
import { WorkspaceRef } from '../schema/workspace.js';

builder.queryFields((t) => ({
  workspace: t.field({
    type: WorkspaceRef,
    description: 'The workspace of your credentials.',
    resolve: (_root, _args, ctx) => ctx.service.workspace(ctx.actor),
  }),
}));

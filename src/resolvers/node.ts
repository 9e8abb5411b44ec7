import { builder } from '../schema/builder.js';
import { asNode, NodeRef } from '../schema/node.js';

builder.queryFields((t) => ({
  node: t.field({
    type: NodeRef,
    nullable: true,
    description:
      "Any object of your workspace by its id alone (Relay's refetch): a Job, Execution, Endpoint, PayloadSpec, Config, Run, Finding, ApiKey or AuditEntry (these two ADMIN only: FORBIDDEN otherwise), or your Workspace. null when no such object is yours.",
    args: { id: t.arg.id({ required: true, description: 'The id.' }) },
    resolve: async (_root, args, ctx) => {
      const found = await ctx.service.node(ctx.actor, String(args.id));
      return found ? asNode(found.kind, found.value as { id: string }) : null;
    },
  }),
}));

import {
  ApiKeyRef,
  AuditPageRef,
  CreateApiKeyInputRef,
  CreateApiKeyPayloadRef,
  createApiKeyValidation,
  CreateWorkspaceInputRef,
  CreateWorkspacePayloadRef,
  createWorkspaceValidation,
} from '../schema/access.js';
import { builder } from '../schema/builder.js';

builder.queryFields((t) => ({
  apiKeys: t.field({
    type: [ApiKeyRef],
    description: "The workspace's API keys, newest first. ADMIN only.",
    resolve: (_root, _args, ctx) => ctx.service.apiKeys(ctx.actor),
  }),
  auditLog: t.field({
    type: AuditPageRef,
    description: "The workspace's audit log, newest first. ADMIN only.",
    args: {
      action: t.arg.string({ description: 'Only entries of this action, e.g. "job.cancel".' }),
      targetId: t.arg.string({ description: 'Only entries about this id.' }),
      resultCode: t.arg.string({ description: 'Only entries with this result, e.g. "FORBIDDEN".' }),
      first: t.arg.int({ description: 'How many entries, 1 to 200. Default 50.' }),
      after: t.arg.string({ description: '`nextCursor` of the previous page.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.auditLog(ctx.actor, args),
  }),
}));

builder.mutationFields((t) => ({
  createApiKey: t.field({
    type: CreateApiKeyPayloadRef,
    description: 'Creates an API key in your workspace; the key is in the answer, once. ADMIN only.',
    args: { input: t.arg({ type: CreateApiKeyInputRef, required: true, description: 'The key.', validate: createApiKeyValidation }) },
    resolve: (_root, args, ctx) => ctx.service.createApiKey(ctx.actor, args.input as never),
  }),
  revokeApiKey: t.field({
    type: ApiKeyRef,
    description: 'Revokes an API key: it stops working at once, live streams included: its WebSocket connections close with 4403 and its Server-Sent Events streams end with UNAUTHENTICATED, on every gateway. ADMIN only; an installation-admin key only by an installation admin (FORBIDDEN otherwise).',
    args: { id: t.arg.id({ required: true, description: 'The key to revoke.' }) },
    resolve: (_root, args, ctx) => ctx.service.revokeApiKey(ctx.actor, String(args.id)),
  }),
  createWorkspace: t.field({
    type: CreateWorkspacePayloadRef,
    description: 'Creates a workspace and its first ADMIN key. Installation admins only.',
    args: { input: t.arg({ type: CreateWorkspaceInputRef, required: true, description: 'The workspace.', validate: createWorkspaceValidation }) },
    resolve: (_root, args, ctx) => ctx.service.createWorkspace(ctx.actor, args.input as never),
  }),
}));

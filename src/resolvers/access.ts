import {
  ApiKeyConnectionRef,
  ApiKeyRef,
  AuditEntryConnectionRef,
  AuditPageRef,
  CreateApiKeyInputRef,
  CreateApiKeyPayloadRef,
  createApiKeyValidation,
  CreateWorkspaceInputRef,
  SubscriptionTicketPayloadRef,
  CreateWorkspacePayloadRef,
  createWorkspaceValidation,
} from '../schema/access.js';
import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';

type ArgBuilder = Parameters<typeof pageArgs>[0];

/** The filters of both audit lists. */
function auditFilterArgs(arg: ArgBuilder) {
  return {
    action: arg.string({ description: 'Only entries of this action, e.g. "job.cancel".' }),
    targetId: arg.string({ description: 'Only entries about this id.' }),
    resultCode: arg.string({ description: 'Only entries with this result, e.g. "FORBIDDEN".' }),
  };
}

builder.queryFields((t) => ({
  apiKeyConnection: t.field({
    type: ApiKeyConnectionRef,
    description: "The workspace's API keys (revoked ones included), newest first, a page at a time. ADMIN only.",
    args: pageArgs(t.arg),
    resolve: (_root, args, ctx) => ctx.service.apiKeyConnection(ctx.actor, args),
  }),
  apiKeys: t.field({
    type: [ApiKeyRef],
    description: "The workspace's API keys, newest first, all at once. ADMIN only.",
    deprecationReason: 'Use apiKeyConnection: a Relay connection like every other list, with totalCount.',
    resolve: (_root, _args, ctx) => ctx.service.apiKeys(ctx.actor),
  }),
  auditLogConnection: t.field({
    type: AuditEntryConnectionRef,
    description: "The workspace's audit log, newest first, a page at a time, by action, target and result. ADMIN only.",
    args: { ...pageArgs(t.arg), ...auditFilterArgs(t.arg) },
    resolve: (_root, { first, after, ...filter }, ctx) => ctx.service.auditLogConnection(ctx.actor, filter, { first, after }),
  }),
  auditLog: t.field({
    type: AuditPageRef,
    description: "The workspace's audit log, newest first. ADMIN only.",
    deprecationReason: 'Use auditLogConnection: a Relay connection like every other list, with totalCount.',
    args: {
      ...auditFilterArgs(t.arg),
      first: t.arg.int({ description: 'How many entries, 1 to 200. Default 50.' }),
      after: t.arg.string({ description: '`nextCursor` of the previous page.' }),
    },
    resolve: (_root, args, ctx) => ctx.service.auditLog(ctx.actor, args),
  }),
}));

builder.mutationFields((t) => ({
  createSubscriptionTicket: t.field({
    type: SubscriptionTicketPayloadRef,
    description:
      'Mints a short-lived (60 s), single-use ticket that opens one Server-Sent Events subscription without an Authorization header (`?ticket=`), ' +
      "for a browser's EventSource, so no long-lived key is put in a URL. Any role; the stream acts as this key, with its role, and ends when the key is revoked.",
    resolve: (_root, _args, ctx) => ctx.service.createSubscriptionTicket(ctx.actor),
  }),
  createApiKey: t.field({
    type: CreateApiKeyPayloadRef,
    description: 'Creates an API key in your workspace; the key is in the answer, once. ADMIN only.',
    args: { input: t.arg({ type: CreateApiKeyInputRef, required: true, description: 'The key.', validate: createApiKeyValidation }) },
    resolve: (_root, args, ctx) => ctx.service.createApiKey(ctx.actor, args.input as never),
  }),
  revokeApiKey: t.field({
    type: ApiKeyRef,
    description:
      "Revokes an API key: it stops working at once, live streams included: its WebSocket connections close with 4403 and its Server-Sent Events streams end with UNAUTHENTICATED, on every gateway. ADMIN only; an installation-admin key only by an installation admin (FORBIDDEN otherwise). The workspace's last live ADMIN key cannot be revoked (CONFLICT, details.reason LAST_ADMIN_KEY): create another first.",
    args: { id: t.arg.id({ required: true, description: 'The key to revoke.' }) },
    resolve: (_root, args, ctx) => ctx.service.revokeApiKey(ctx.actor, String(args.id)),
  }),
  createWorkspace: t.field({
    type: CreateWorkspacePayloadRef,
    description: 'Creates a workspace and its first ADMIN key. Installation admins only.',
    args: {
      input: t.arg({ type: CreateWorkspaceInputRef, required: true, description: 'The workspace.', validate: createWorkspaceValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.createWorkspace(ctx.actor, args.input as never),
  }),
}));

import type { ApiKey, AuditEntry, AuditPage, CreateApiKeyResult, SubscriptionTicket } from '../service/access/access.js';
import { createApiKeySchema, createWorkspaceSchema } from '../service/access/access.js';
import type { Workspace } from '../service/kernel/models.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, JSONScalar, nodeId, zodInput } from './common.js';
import { WorkspaceRef } from './workspace.js';

export const RoleEnum = builder.enumType('Role', {
  description: 'What an API key may do.',
  values: {
    ADMIN: { description: 'Everything in the workspace, including API keys and the audit log.' },
    OPERATOR: {
      description:
        'Create jobs and endpoints; update or cancel those its own key created; run and re-drive any execution, and cancel the executions its key started or of jobs its key created.',
    },
    VIEWER: { description: 'Read and subscribe only.' },
  } as const,
});

export const ApiKeyRef = builder.nodeRef<ApiKey>('ApiKey', { id: nodeId() }).implement({
  description: 'An API key of the workspace. The key itself is shown only once, when created; only its hash is stored.',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'What the key is for, for people.' }),
    role: t.field({ type: RoleEnum, description: 'What the key may do.', resolve: (k) => k.role }),
    installationAdmin: t.exposeBoolean('installationAdmin', { description: 'Whether the key may create workspaces.' }),
    prefix: t.exposeString('prefix', { description: 'The first characters of the key, to tell keys apart.' }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the key was created.', resolve: (k) => k.createdAt }),
    lastUsedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the key was last used (to the minute).',
      resolve: (k) => k.lastUsedAt,
    }),
    revokedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the key was revoked; revoked keys stop working at once.',
      resolve: (k) => k.revokedAt,
    }),
  }),
});

export const CreateApiKeyPayloadRef = builder.objectRef<CreateApiKeyResult>('CreateApiKeyPayload').implement({
  description: 'A new API key.',
  fields: (t) => ({
    apiKey: t.field({ type: ApiKeyRef, description: 'The key record.', resolve: (r) => r.apiKey }),
    key: t.exposeString('key', { description: 'The key itself, to send as "Authorization: Bearer <key>". Shown this once: store it now.' }),
  }),
});

export const SubscriptionTicketPayloadRef = builder.objectRef<SubscriptionTicket>('SubscriptionTicketPayload').implement({
  description:
    "A subscription ticket: opens one Server-Sent Events subscription from a browser's EventSource, which cannot send an Authorization header. " +
    'Single-use, valid for 60 seconds, acting as the key that minted it with the role it had.',
  fields: (t) => ({
    ticket: t.exposeString('ticket', {
      description:
        'The ticket: open `GET /graphql?query=<a subscription>&variables=<JSON>&ticket=<this>` with `Accept: text/event-stream` (what EventSource sends). ' +
        'Used up by that request; other operations are refused (FORBIDDEN). A used, expired or unknown ticket, or one whose key was revoked, is UNAUTHENTICATED.',
    }),
    expiresAt: t.field({
      type: DateTimeScalar,
      description: 'When the ticket stops working if it is not used.',
      resolve: (r) => r.expiresAt,
    }),
  }),
});

export const CreateWorkspacePayloadRef = builder
  .objectRef<{ workspace: Workspace; adminKey: CreateApiKeyResult }>('CreateWorkspacePayload')
  .implement({
    description: 'A new workspace and its first ADMIN key.',
    fields: (t) => ({
      workspace: t.field({ type: WorkspaceRef, description: 'The workspace.', resolve: (r) => r.workspace }),
      adminKey: t.field({ type: CreateApiKeyPayloadRef, description: 'Its first ADMIN key, shown this once.', resolve: (r) => r.adminKey }),
    }),
  });

export const AuditEntryRef = builder
  .nodeRef<AuditEntry>('AuditEntry', {
    id: nodeId('Opaque, stable identifier, meaningful in this workspace only; entries are listed newest first.'),
  })
  .implement({
    description: 'One mutation, as recorded: who, what, on what, with which (redacted) input, and how it ended.',
    fields: (t) => ({
      actorKind: t.exposeString('actorKind', { description: '"user" (an API key), "library" (the embedding app) or "system" (jobgate).' }),
      actorKeyId: t.exposeID('actorKeyId', { nullable: true, description: 'The API key that acted, if any.' }),
      action: t.exposeString('action', { description: 'What was done, e.g. "job.create".' }),
      targetType: t.exposeString('targetType', { nullable: true, description: 'The kind of thing acted on, e.g. "Job".' }),
      targetId: t.exposeString('targetId', { nullable: true, description: 'The id of the thing acted on.' }),
      input: t.field({ type: JSONScalar, description: 'The input, with every secret replaced by "[redacted]".', resolve: (e) => e.input }),
      resultCode: t.exposeString('resultCode', { description: '"OK", or the error code the action was refused with.' }),
      createdAt: t.field({ type: DateTimeScalar, description: 'When it happened.', resolve: (e) => e.createdAt }),
    }),
  });

export const ApiKeyConnectionRef = connectionOf('ApiKey', ApiKeyRef, 'API key');
export const AuditEntryConnectionRef = connectionOf('AuditEntry', AuditEntryRef, 'audit entry');

export const AuditPageRef = builder.objectRef<AuditPage>('AuditPage').implement({
  description: 'A page of the audit log, newest first. Superseded by AuditEntryConnection (auditLogConnection).',
  fields: (t) => ({
    entries: t.field({ type: [AuditEntryRef], description: 'The entries of this page.', resolve: (p) => p.entries }),
    nextCursor: t.exposeString('nextCursor', {
      nullable: true,
      description: 'Pass as `after` for the next (older) page; null at the end.',
      deprecationReason: 'Use auditLogConnection: pageInfo.endCursor and hasNextPage.',
    }),
  }),
});

export const CreateApiKeyInputRef = builder.inputType('CreateApiKeyInput', {
  description: 'A new API key in your workspace.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'What the key is for.' }),
    role: t.field({ type: RoleEnum, required: true, description: 'What it may do.' }),
    installationAdmin: t.boolean({ description: 'May create workspaces (only an installation admin may grant this). Default false.' }),
  }),
});
export const createApiKeyValidation = zodInput(createApiKeySchema);

export const CreateWorkspaceInputRef = builder.inputType('CreateWorkspaceInput', {
  description: 'A new workspace.',
  fields: (t) => ({
    slug: t.string({ required: true, description: 'Short unique name: lowercase letters, digits and -.' }),
    name: t.string({ required: true, description: 'Display name.' }),
  }),
});
export const createWorkspaceValidation = zodInput(createWorkspaceSchema);

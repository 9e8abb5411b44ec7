/**
 * API keys, authentication, workspaces and the audit log.
 */
import { sql } from 'kysely';
import { z } from 'zod';
import type { ApiKeyRow, AuditRow } from '../db/types.js';
import { activeKeysByIds, apiKeyPage, countApiKeys, findApiKey, notifyKeyChanged } from '../db/repos/api-keys.js';
import { auditPage, countAudit, findAuditEntry } from '../db/repos/audit.js';
import { insertTicket, redeemTicket, ticketRedeemable } from '../db/repos/subscription-tickets.js';
import { findWorkspaceById, findWorkspaceBySlug } from '../db/repos/workspaces.js';
import { isUuid, scoped } from '../db/repos/scope.js';
import { isInstallationAdmin, type Actor, type Role } from './actor.js';
import { mutate, requireRole } from './audit.js';
import { parseInput, type ServiceContext } from './context.js';
import type { WorkspaceCursors } from './cursors.js';
import { pageSchema, text, type PageInput } from './inputs.js';
import { COUNT_LIMIT, decodeCursor, encodeCursor, pageConnection, pageSize, type Connection } from './pagination.js';
import { ConflictError, ForbiddenError, NotFoundError } from './errors.js';
import { toWorkspace, type Workspace } from './models.js';
import { hashApiKey, newApiKey, newSubscriptionTicket } from './secrets.js';
import { createAuthenticator, UnauthenticatedError } from './authenticate.js';

export interface ApiKey {
  id: string;
  workspaceId: string;
  name: string;
  role: Role;
  installationAdmin: boolean;
  /** The first characters of the key, to tell keys apart. */
  prefix: string;
  createdByKeyId: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface CreateApiKeyResult {
  apiKey: ApiKey;
  /** The key itself. Shown this once; only its hash is stored. */
  key: string;
}

export interface AuditEntry {
  /** Opaque and stable: the row's id sealed with its workspace's key (./cursors.ts). */
  id: string;
  actorKind: string;
  actorKeyId: string | null;
  action: string;
  targetType: string | null;
  targetId: string | null;
  input: unknown;
  resultCode: string;
  createdAt: Date;
}

/** Who a caller is (see `viewer`). */
export interface Viewer {
  role: Role;
  installationAdmin: boolean;
  workspace: Workspace;
  /** The caller's API key; null for jobgate itself and the embedding application. */
  apiKey: ApiKey | null;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `after` for the next (older) page; null at the end. */
  nextCursor: string | null;
}

const toApiKey = (r: ApiKeyRow): ApiKey => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  role: r.role,
  installationAdmin: r.installation_admin,
  prefix: r.prefix,
  createdByKeyId: r.created_by_key_id,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

const toAuditEntry = (r: AuditRow, cursors: WorkspaceCursors): AuditEntry => ({
  id: cursors.seal('audit', r.id),
  actorKind: r.actor_kind,
  actorKeyId: r.actor_key_id,
  action: r.action,
  targetType: r.target_type,
  targetId: r.target_id,
  input: r.input,
  resultCode: r.result_code,
  createdAt: r.created_at,
});

export { UnauthenticatedError } from './authenticate.js';

export const createApiKeySchema = z.object({
  name: text().min(1).max(200),
  role: z.enum(['ADMIN', 'OPERATOR', 'VIEWER']),
  installationAdmin: z.boolean().nullish(),
});
export type CreateApiKeyInput = z.input<typeof createApiKeySchema>;

export const createWorkspaceSchema = z.object({
  slug: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be lowercase letters, digits and -, up to 63 characters'),
  name: text().min(1).max(200),
});
export type CreateWorkspaceInput = z.input<typeof createWorkspaceSchema>;

export const auditFilterSchema = z.object({
  action: text().max(100).nullish(),
  targetId: text().max(100).nullish(),
  resultCode: text().max(100).nullish(),
  first: z.number().int().min(1).max(200).nullish(),
  after: text().max(100).nullish(),
});
export type AuditFilter = z.input<typeof auditFilterSchema>;

export const auditLogFilterSchema = auditFilterSchema.pick({ action: true, targetId: true, resultCode: true });
export type AuditLogFilter = z.input<typeof auditLogFilterSchema>;

export interface SubscriptionTicket {
  /** The ticket itself, for `?ticket=`. Shown this once; only its hash is stored. */
  ticket: string;
  /** When it stops working if unused. */
  expiresAt: Date;
}

/** How long a subscription ticket lives: long enough to open a stream, too short to be worth stealing. */
export const SUBSCRIPTION_TICKET_TTL_MS = 60_000;

export function createAccessService(ctx: ServiceContext) {
  const { db } = ctx;
  const authenticator = createAuthenticator(ctx);

  async function insertKey(
    ex: typeof db,
    workspaceId: string,
    input: { name: string; role: Role; installationAdmin: boolean; createdBy: string | null },
  ) {
    const { key, prefix, hash } = newApiKey();
    const row = await ex
      .insertInto('api_keys')
      .values({
        workspace_id: scoped(workspaceId),
        name: input.name,
        role: input.role,
        installation_admin: input.installationAdmin,
        prefix,
        key_hash: hash,
        created_by_key_id: input.createdBy,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { apiKey: toApiKey(row), key };
  }

  return {
    /**
     * Who a bearer key is. Throws UNAUTHENTICATED for a missing, unknown or revoked key, with
     * the same message for each. Records `last_used_at` (at most once a minute per key).
     */
    async authenticate(key: string | undefined | null): Promise<Actor> {
      // Remembered for a second (./authenticate.ts); a revocation here is forgotten at once.
      return authenticator.authenticate(key);
    },

    /**
     * Mints a subscription ticket for the calling key: single-use, valid for 60 s, bound to the
     * key, its workspace and its role. A browser's EventSource, which cannot send headers, opens
     * one Server-Sent Events subscription with it (`?ticket=`), so no long-lived key goes in a
     * URL. Any role; only API keys (FORBIDDEN for the library's and jobgate's own actors, which
     * have no key). Only the ticket's hash is stored.
     */
    async createSubscriptionTicket(actor: Actor): Promise<SubscriptionTicket> {
      const target = (r: { id: string }) => ({ type: 'SubscriptionTicket', id: r.id });
      const minted = await mutate(ctx, actor, { action: 'subscriptionTicket.create', role: 'VIEWER', input: {}, target }, async (trx) => {
        if (actor.kind !== 'user' || !actor.keyId)
          throw new ForbiddenError('subscription tickets are minted for API keys; this caller has none');
        const { ticket, hash } = newSubscriptionTicket();
        const row = await insertTicket(trx, {
          workspaceId: scoped(actor.workspaceId),
          keyId: actor.keyId,
          role: actor.role,
          hash,
          ttlMs: SUBSCRIPTION_TICKET_TTL_MS,
        });
        return { id: row.id, ticket, expiresAt: row.expires_at };
      });
      return { ticket: minted.ticket, expiresAt: minted.expiresAt };
    },

    /**
     * Who a subscription ticket acts for, using it up: the key that minted it, with the role it
     * had then. Throws UNAUTHENTICATED (the same message for each) for an unknown, used or expired
     * ticket, and for one whose key was revoked or changed role since.
     */
    async redeemSubscriptionTicket(ticket: string | undefined | null): Promise<Actor> {
      const refused = new UnauthenticatedError(
        'the subscription ticket is unknown, used or expired: mint another with createSubscriptionTicket',
      );
      if (!ticket || !/^jgt_[A-Za-z0-9_-]{20,100}$/.test(ticket)) throw refused;
      const row = await redeemTicket(db, hashApiKey(ticket));
      if (!row) throw refused;
      return { workspaceId: row.workspace_id, kind: 'user', role: row.role, keyId: row.key_id, installationAdmin: row.installation_admin };
    },

    /**
     * Throws UNAUTHENTICATED, as redeemSubscriptionTicket would, unless the ticket would redeem
     * now; does not use it up. For a request answered before its ticket is redeemed.
     */
    async checkSubscriptionTicket(ticket: string | undefined | null): Promise<void> {
      if (!ticket || !/^jgt_[A-Za-z0-9_-]{20,100}$/.test(ticket) || !(await ticketRedeemable(db, hashApiKey(ticket))))
        throw new UnauthenticatedError('the subscription ticket is unknown, used or expired: mint another with createSubscriptionTicket');
    },

    /**
     * Of these actors, the ones their key no longer backs as it did when they were
     * authenticated: the key is revoked (or gone), or grants another role or installation-admin
     * standing now. Whatever such an actor has open must end (Invariant 10): a lowered role would
     * otherwise keep what it may no longer open, and a raised one is simply authenticated again.
     * Actors without a key (jobgate itself, the library) never lapse. One query for all.
     */
    async lapsedActors<A extends Actor>(actors: readonly A[]): Promise<A[]> {
      const ids = [...new Set(actors.flatMap((a) => (a.kind === 'user' && a.keyId ? [a.keyId] : [])))];
      const standing = new Map((await activeKeysByIds(db, ids.filter(isUuid))).map((k) => [k.id, k]));
      return actors.filter((a) => {
        if (a.kind !== 'user' || !a.keyId) return false;
        const key = standing.get(a.keyId);
        return !key || key.role !== a.role || key.installation_admin !== (a.installationAdmin === true);
      });
    },

    /**
     * Creates an API key in the actor's workspace. ADMIN only; an installation-admin key only
     * from an installation admin (or jobgate itself). The key is in the result, once.
     */
    async createApiKey(actor: Actor, raw: CreateApiKeyInput): Promise<CreateApiKeyResult> {
      const target = (r: CreateApiKeyResult) => ({ type: 'ApiKey', id: r.apiKey.id });
      return mutate(ctx, actor, { action: 'apiKey.create', role: 'ADMIN', input: raw, target }, async (trx) => {
        const input = parseInput(createApiKeySchema, raw);
        if (input.installationAdmin && !actor.installationAdmin && actor.kind !== 'system') {
          throw new ForbiddenError('only an installation admin may create installation-admin keys');
        }
        return insertKey(trx as unknown as typeof db, actor.workspaceId, {
          name: input.name,
          role: input.role,
          installationAdmin: input.installationAdmin ?? false,
          createdBy: actor.keyId ?? null,
        });
      });
    },

    /**
     * Revokes a key: it stops working at once: new requests are refused, and the gateways end
     * the live streams it has open (a notification sent in this transaction). ADMIN
     * only; an installation-admin key only by an installation admin (or jobgate itself), as only
     * they may create one: otherwise any ADMIN of its workspace could lock the installation's
     * administrators out. Idempotent. The workspace's last live ADMIN key is refused (CONFLICT,
     * `details.reason: 'LAST_ADMIN_KEY'`): a workspace must never be left with no one to administer it.
     */
    async revokeApiKey(actor: Actor, id: string): Promise<ApiKey> {
      return mutate(ctx, actor, { action: 'apiKey.revoke', role: 'ADMIN', input: { id }, target: { type: 'ApiKey', id } }, async (trx) => {
        if (!isUuid(id)) throw new NotFoundError('ApiKey', id);
        // The workspace's live ADMIN keys, locked first and in id order: two revokes of its last
        // two ADMIN keys run one after the other (no deadlock), and the second sees one left.
        const admins = await trx
          .selectFrom('api_keys')
          .select('id')
          .where('workspace_id', '=', scoped(actor.workspaceId))
          .where('role', '=', 'ADMIN')
          .where('revoked_at', 'is', null)
          .orderBy('id')
          .forUpdate()
          .execute();
        if (admins.length === 1 && admins[0]!.id === id) {
          throw new ConflictError("this is the workspace's last ADMIN key; create another ADMIN key before revoking it", {
            reason: 'LAST_ADMIN_KEY',
          });
        }
        const key = await trx
          .selectFrom('api_keys')
          .select('installation_admin')
          .where('workspace_id', '=', scoped(actor.workspaceId))
          .where('id', '=', id)
          .forUpdate()
          .executeTakeFirst();
        if (!key) throw new NotFoundError('ApiKey', id);
        if (key.installation_admin && !isInstallationAdmin(actor)) {
          throw new ForbiddenError('only an installation admin may revoke an installation-admin key');
        }
        const row = await trx
          .updateTable('api_keys')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, now())` })
          .where('id', '=', id)
          .returningAll()
          .executeTakeFirstOrThrow();
        // Every gateway replica ends the key's live streams when this commits (see lapsedActors).
        await notifyKeyChanged(trx, id);
        return toApiKey(row);
      }).finally(() => authenticator.forget(id));
    },

    /** The workspace's keys, newest first (never the keys themselves). ADMIN only. */
    async apiKeys(actor: Actor): Promise<ApiKey[]> {
      requireRole(actor, 'ADMIN', 'listing API keys');
      const rows = await db
        .selectFrom('api_keys')
        .selectAll()
        .where('workspace_id', '=', scoped(actor.workspaceId))
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .execute();
      return rows.map(toApiKey);
    },

    /**
     * The workspace's keys (never the keys themselves), newest first, a page at a time, with a
     * count when asked for. ADMIN only (FORBIDDEN). VALIDATION_FAILED for a cursor this list did
     * not issue or a page size out of range.
     */
    async apiKeyConnection(actor: Actor, rawPage: PageInput = {}): Promise<Connection<ApiKey>> {
      requireRole(actor, 'ADMIN', 'listing API keys');
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const ws = scoped(actor.workspaceId);
      const rows = await apiKeyPage(db, ws, { limit: size + 1, afterId: page.after ? decodeCursor(page.after) : undefined });
      return pageConnection(
        rows.map(toApiKey),
        size,
        (k) => encodeCursor(k.id),
        async () => Math.min(await countApiKeys(db, ws), COUNT_LIMIT),
      );
    },

    /** One key of the workspace (never the key itself). ADMIN only (FORBIDDEN); NOT_FOUND otherwise. */
    async apiKey(actor: Actor, id: string): Promise<ApiKey> {
      requireRole(actor, 'ADMIN', 'reading API keys');
      const row = isUuid(id) ? await findApiKey(db, scoped(actor.workspaceId), id) : undefined;
      if (!row) throw new NotFoundError('ApiKey', id);
      return toApiKey(row);
    },

    /**
     * Creates a workspace (with its reaper) and its first ADMIN key. Installation admins only
     * (isInstallationAdmin: an installation-admin key, jobgate itself, or the embedding application).
     * Throws FORBIDDEN, VALIDATION_FAILED, CONFLICT (slug taken).
     */
    async createWorkspace(actor: Actor, raw: CreateWorkspaceInput): Promise<{ workspace: Workspace; adminKey: CreateApiKeyResult }> {
      const target = (r: { workspace: Workspace }) => ({ type: 'Workspace', id: r.workspace.id });
      return mutate(ctx, actor, { action: 'workspace.create', role: 'ADMIN', input: raw, target }, async (trx) => {
        if (!isInstallationAdmin(actor)) throw new ForbiddenError('creating workspaces needs an installation-admin key');
        const input = parseInput(createWorkspaceSchema, raw);
        const row = await trx
          .insertInto('workspaces')
          .values({ slug: input.slug, name: input.name })
          .onConflict((oc) => oc.column('slug').doNothing())
          .returningAll()
          .executeTakeFirst();
        if (!row) throw new ConflictError(`a workspace with slug "${input.slug}" already exists`, { slug: input.slug });
        const adminKey = await insertKey(trx as unknown as typeof db, row.id, {
          name: 'first admin',
          role: 'ADMIN',
          installationAdmin: false,
          createdBy: actor.keyId ?? null,
        });
        return { workspace: toWorkspace(row), adminKey };
      });
    },

    /** The audit log, newest first, filterable. ADMIN only. */
    async auditLog(actor: Actor, raw: AuditFilter = {}): Promise<AuditPage> {
      requireRole(actor, 'ADMIN', 'reading the audit log');
      const f = parseInput(auditFilterSchema, raw);
      const size = f.first ?? 50;
      const cursors = await ctx.cursors.forWorkspace(db, scoped(actor.workspaceId));
      const afterId = f.after ? Number(cursors.open('audit', f.after, ['after'])) : undefined;
      let q = db.selectFrom('audit_log').selectAll().where('workspace_id', '=', scoped(actor.workspaceId));
      if (f.action) q = q.where('action', '=', f.action);
      if (f.targetId) q = q.where('target_id', '=', f.targetId);
      if (f.resultCode) q = q.where('result_code', '=', f.resultCode);
      if (afterId !== undefined) q = q.where('id', '<', afterId);
      const rows = await q
        .orderBy('id', 'desc')
        .limit(size + 1)
        .execute();
      const entries = rows.slice(0, size).map((r) => toAuditEntry(r, cursors));
      return {
        entries,
        // A page goes on after (below) its last entry: its id is the cursor.
        nextCursor: rows.length > size ? entries.at(-1)!.id : null,
      };
    },

    /**
     * The audit log, newest first, filterable, a page at a time, with a bounded count when asked
     * for. ADMIN only (FORBIDDEN). VALIDATION_FAILED for a cursor this list did not issue (another
     * list's, another workspace's) or a page size out of range.
     */
    async auditLogConnection(actor: Actor, rawFilter: AuditLogFilter = {}, rawPage: PageInput = {}): Promise<Connection<AuditEntry>> {
      requireRole(actor, 'ADMIN', 'reading the audit log');
      const filter = parseInput(auditLogFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const ws = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      const beforeId = page.after ? cursors.open('audit', page.after, ['after']) : undefined;
      const rows = await auditPage(db, ws, filter, { limit: size + 1, beforeId });
      // An entry's id is its cursor: the page after it is the entries below it.
      return pageConnection(
        rows.map((r) => toAuditEntry(r, cursors)),
        size,
        (e) => e.id,
        () => countAudit(db, ws, filter, COUNT_LIMIT),
      );
    },

    /** One audit entry by its (sealed) id. ADMIN only (FORBIDDEN); NOT_FOUND otherwise. */
    async auditEntry(actor: Actor, id: string): Promise<AuditEntry> {
      requireRole(actor, 'ADMIN', 'reading the audit log');
      const ws = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      let rowId: bigint;
      try {
        rowId = cursors.open('audit', id, ['id']);
      } catch {
        throw new NotFoundError('AuditEntry', id);
      }
      const row = await findAuditEntry(db, ws, rowId);
      if (!row) throw new NotFoundError('AuditEntry', id);
      return toAuditEntry(row, cursors);
    },

    /**
     * A new key for a workspace by slug, as jobgate itself (the CLI's `keys create` and the
     * embedded default's first start). Throws NOT_FOUND, VALIDATION_FAILED (a name or role the
     * table would refuse: checked here, since a refusal there logs the row).
     */
    async bootstrapKey(workspaceSlug: string, role: Role, name: string, installationAdmin = false): Promise<CreateApiKeyResult> {
      parseInput(createApiKeySchema, { name, role, installationAdmin });
      const ws = await findWorkspaceBySlug(db, workspaceSlug);
      if (!ws) throw new NotFoundError('Workspace', workspaceSlug);
      const system: Actor = { workspaceId: ws.id, kind: 'system', role: 'ADMIN', installationAdmin: true };
      return mutate(
        ctx,
        system,
        {
          action: 'apiKey.bootstrap',
          role: 'ADMIN',
          input: { name, role },
          target: (r: CreateApiKeyResult) => ({ type: 'ApiKey', id: r.apiKey.id }),
        },
        (trx) => insertKey(trx as unknown as typeof db, ws.id, { name, role, installationAdmin, createdBy: null }),
      );
    },

    /**
     * The id of the workspace with this slug, for jobgate itself (the library's actors, the
     * start-up check that the database was migrated by jobgate). Throws NOT_FOUND.
     */
    async workspaceIdOf(workspaceSlug: string): Promise<string> {
      const ws = await findWorkspaceBySlug(db, workspaceSlug);
      if (!ws) throw new NotFoundError('Workspace', workspaceSlug);
      return ws.id;
    },

    /**
     * Who the caller is, as a console shows it: its role, its workspace and, for an API key, the
     * key's name and prefix (never the key). Any authenticated caller; reads only.
     */
    async viewer(actor: Actor): Promise<Viewer> {
      const workspace = await findWorkspaceById(db, actor.workspaceId);
      if (!workspace) throw new NotFoundError('Workspace', actor.workspaceId);
      const key = actor.keyId && isUuid(actor.keyId) ? await findApiKey(db, actor.workspaceId, actor.keyId) : undefined;
      return {
        role: actor.role,
        installationAdmin: actor.installationAdmin === true,
        workspace: toWorkspace(workspace),
        apiKey: key ? toApiKey(key) : null,
      };
    },

    /** Whether any key exists at all (the embedded default bootstraps one when none does). */
    async anyApiKey(): Promise<boolean> {
      return !!(await db.selectFrom('api_keys').select('id').limit(1).executeTakeFirst());
    },
  };
}

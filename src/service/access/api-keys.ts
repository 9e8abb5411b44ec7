/**
 * API keys: created (the key shown once, only its hash stored), revoked, listed. Who a key is
 * when it is presented is ./access.ts.
 */
import { z } from 'zod';
import * as apiKeysRepo from '../../db/repositories/api-keys.js';
import { isUuid, scoped, type Executor } from '../../db/repositories/scope.js';
import { findWorkspaceBySlug } from '../../db/repositories/workspaces.js';
import type { ApiKeyRow } from '../../db/types.js';
import { isInstallationAdmin, type Actor, type Role } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { requireRole } from '../kernel/authorisation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../kernel/errors.js';
import { displayName, pageSchema, type PageInput } from '../kernel/inputs.js';
import { COUNT_LIMIT, decodeCursor, encodeCursor, pageConnection, pageSize, type Connection } from '../kernel/pagination.js';
import { newApiKey } from '../kernel/secrets.js';

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

export const toApiKey = (r: ApiKeyRow): ApiKey => ({
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

export const createApiKeySchema = z.object({
  name: displayName(),
  role: z.enum(['ADMIN', 'OPERATOR', 'VIEWER']),
  installationAdmin: z.boolean().nullish(),
});
export type CreateApiKeyInput = z.input<typeof createApiKeySchema>;

/** A new key in the workspace: the row, and the key itself (to show once). */
export async function mintApiKey(
  ex: Executor,
  workspaceId: string,
  input: { name: string; role: Role; installationAdmin: boolean; createdBy: string | null },
): Promise<CreateApiKeyResult> {
  const { key, prefix, hash } = newApiKey();
  const row = await apiKeysRepo.insertApiKey(ex, {
    workspaceId,
    name: input.name,
    role: input.role,
    installationAdmin: input.installationAdmin,
    prefix,
    keyHash: hash,
    createdByKeyId: input.createdBy,
  });
  return { apiKey: toApiKey(row), key };
}

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createApiKeysService(ctx: ServiceContext, hooks: { keyChanged(id: string): void } = { keyChanged() {} }) {
  const { db } = ctx;

  return {
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
        return mintApiKey(trx, actor.workspaceId, {
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
        const admins = await apiKeysRepo.lockLiveAdminKeyIds(trx, actor.workspaceId);
        if (admins.length === 1 && admins[0] === id) {
          throw new ConflictError("this is the workspace's last ADMIN key; create another ADMIN key before revoking it", {
            reason: 'LAST_ADMIN_KEY',
          });
        }
        const key = await apiKeysRepo.lockApiKey(trx, actor.workspaceId, id);
        if (!key) throw new NotFoundError('ApiKey', id);
        if (key.installation_admin && !isInstallationAdmin(actor)) {
          throw new ForbiddenError('only an installation admin may revoke an installation-admin key');
        }
        const row = await apiKeysRepo.revokeApiKey(trx, id);
        // Every gateway replica ends the key's live streams when this commits (see lapsedActors).
        await apiKeysRepo.notifyKeyChanged(trx, id);
        return toApiKey(row);
      }).finally(() => hooks.keyChanged(id));
    },

    /** The workspace's keys, newest first (never the keys themselves). ADMIN only. */
    async apiKeys(actor: Actor): Promise<ApiKey[]> {
      requireRole(actor, 'ADMIN', 'listing API keys');
      const rows = await apiKeysRepo.listApiKeys(db, actor.workspaceId);
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
      const rows = await apiKeysRepo.apiKeyPage(db, ws, { limit: size + 1, afterId: page.after ? decodeCursor(page.after) : undefined });
      return pageConnection(
        rows.map(toApiKey),
        size,
        (k) => encodeCursor(k.id),
        async () => Math.min(await apiKeysRepo.countApiKeys(db, ws), COUNT_LIMIT),
      );
    },

    /** One key of the workspace (never the key itself). ADMIN only (FORBIDDEN); NOT_FOUND otherwise. */
    async apiKey(actor: Actor, id: string): Promise<ApiKey> {
      requireRole(actor, 'ADMIN', 'reading API keys');
      const row = isUuid(id) ? await apiKeysRepo.findApiKey(db, scoped(actor.workspaceId), id) : undefined;
      if (!row) throw new NotFoundError('ApiKey', id);
      return toApiKey(row);
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
        (trx) => mintApiKey(trx, ws.id, { name, role, installationAdmin, createdBy: null }),
      );
    },

    /** Whether any key exists at all (the embedded default bootstraps one when none does). */
    async anyApiKey(): Promise<boolean> {
      return apiKeysRepo.anyApiKeyExists(db);
    },
  };
}

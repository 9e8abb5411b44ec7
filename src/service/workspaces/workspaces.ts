/**
 * Workspaces, the tenants: created (with their system jobs and a first ADMIN key) by
 * installation admins, and found by slug for jobgate itself.
 */
import { z } from 'zod';
import { findWorkspaceBySlug, insertWorkspace, updateWorkspace } from '../../db/repositories/workspaces.js';
import { isInstallationAdmin, type Actor } from '../kernel/actor.js';
import { mintApiKey, type CreateApiKeyResult } from '../access/api-keys.js';
import { mutate } from '../kernel/audited-mutation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../kernel/errors.js';
import { displayName } from '../kernel/inputs.js';
import { toWorkspace, type Workspace } from '../kernel/models.js';
import { WORKSPACE_SLUG, WORKSPACE_SLUG_RULE } from '../../db/workspace-slug.js';
import { DEADLOCK_DETECTED, isPgError, LOCK_NOT_AVAILABLE } from '../../db/sqlstate.js';

export const createWorkspaceSchema = z.object({
  slug: z.string().regex(WORKSPACE_SLUG, WORKSPACE_SLUG_RULE),
  name: displayName(),
});
export type CreateWorkspaceInput = z.input<typeof createWorkspaceSchema>;

export const updateWorkspaceSchema = z.object({
  name: displayName().nullish(),
  concurrencyLimit: z.number().int().min(1).max(100_000).nullish(),
});
export type UpdateWorkspaceInput = z.input<typeof updateWorkspaceSchema>;

export function createWorkspacesService(ctx: ServiceContext) {
  const { db } = ctx;

  return {
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
        const row = await insertWorkspace(trx, input.slug, input.name);
        if (!row) throw new ConflictError(`a workspace with slug "${input.slug}" already exists`, { slug: input.slug });
        const adminKey = await mintApiKey(trx, row.id, {
          name: 'first admin',
          role: 'ADMIN',
          installationAdmin: false,
          createdBy: actor.keyId ?? null,
        });
        return { workspace: toWorkspace(row), adminKey };
      });
    },

    /**
     * Changes the caller's workspace: its name, and its cap on attempts in flight across its
     * endpoints (concurrencyLimit; null removes it, absent leaves it). ADMIN. Throws FORBIDDEN,
     * VALIDATION_FAILED, CONFLICT (the endpoints stayed locked by the engine's statements).
     */
    async updateWorkspace(actor: Actor, raw: UpdateWorkspaceInput): Promise<Workspace> {
      const target = { type: 'Workspace', id: actor.workspaceId };
      return mutate(ctx, actor, { action: 'workspace.update', role: 'ADMIN', input: raw, target }, async (trx) => {
        const input = parseInput(updateWorkspaceSchema, raw);
        const patch: { name?: string; concurrency_limit?: number | null } = {};
        if (input.name != null) patch.name = input.name;
        if (input.concurrencyLimit !== undefined) patch.concurrency_limit = input.concurrencyLimit;
        const row = await updateWorkspace(trx, actor.workspaceId, patch).catch((error: unknown) => {
          // The cap's change gave way to the engine's statements (see updateWorkspace) every time.
          if (isPgError(error, LOCK_NOT_AVAILABLE) || isPgError(error, DEADLOCK_DETECTED))
            throw new ConflictError("the workspace's endpoints are busy: try again", { workspaceId: actor.workspaceId });
          throw error;
        });
        if (!row) throw new NotFoundError('Workspace', actor.workspaceId);
        return toWorkspace(row);
      });
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
  };
}

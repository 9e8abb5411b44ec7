/**
 * Who a caller is: a bearer API key or a subscription ticket authenticated, whether an actor's
 * key still backs it, and the caller as a console shows it. The areas it brings together: API
 * keys (./api-keys.ts), workspaces (../workspaces/workspaces.ts) and the audit log (./audit-log.ts).
 */
import { activeKeysByIds, findApiKey } from '../../db/repositories/api-keys.js';
import { insertTicket, redeemTicket, ticketRedeemable } from '../../db/repositories/subscription-tickets.js';
import { findWorkspaceById } from '../../db/repositories/workspaces.js';
import { isUuid, scoped } from '../../db/repositories/scope.js';
import type { Actor, Role } from '../kernel/actor.js';
import { createApiKeysService, toApiKey, type ApiKey } from './api-keys.js';
import { mutate } from '../kernel/audited-mutation.js';
import { createAuditLogService } from './audit-log.js';
import type { ServiceContext } from '../kernel/context.js';
import { ForbiddenError, NotFoundError } from '../kernel/errors.js';
import { toWorkspace, type Workspace } from '../kernel/models.js';
import { hashApiKey, newSubscriptionTicket } from '../kernel/secrets.js';
import { createWorkspacesService } from '../workspaces/workspaces.js';
import { createAuthenticator, UnauthenticatedError, type Authenticator } from './authenticate.js';

export { createApiKeySchema, type ApiKey, type CreateApiKeyInput, type CreateApiKeyResult } from './api-keys.js';
export { createWorkspaceSchema, updateWorkspaceSchema, type CreateWorkspaceInput } from '../workspaces/workspaces.js';
export {
  auditFilterSchema,
  auditLogFilterSchema,
  type AuditEntry,
  type AuditFilter,
  type AuditLogFilter,
  type AuditPage,
} from './audit-log.js';

/** Who a caller is (see `viewer`). */
export interface Viewer {
  role: Role;
  installationAdmin: boolean;
  workspace: Workspace;
  /** The caller's API key; null for jobgate itself and the embedding application. */
  apiKey: ApiKey | null;
}

export { UnauthenticatedError } from './authenticate.js';

export interface SubscriptionTicket {
  /** The ticket itself, for `?ticket=`. Shown this once; only its hash is stored. */
  ticket: string;
  /** When it stops working if unused. */
  expiresAt: Date;
}

/** How long a subscription ticket lives: long enough to open a stream, too short to be worth stealing. */
export const SUBSCRIPTION_TICKET_TTL_MS = 60_000;

function createAuthenticationService(ctx: ServiceContext, authenticator: Authenticator) {
  const { db } = ctx;

  return {
    /**
     * Tells authentication that a key's standing may have changed (a key-change notification;
     * undefined: notifications may have been missed), so what it remembers of the key is dropped.
     */
    apiKeyChanged(keyId: string | undefined): void {
      authenticator.forget(keyId);
    },

    /**
     * Who a bearer key is. Throws UNAUTHENTICATED for a missing, unknown or revoked key, with
     * the same message for each. Records `last_used_at` (at most once a minute per key).
     */
    async authenticate(key: string | undefined | null): Promise<Actor> {
      // Remembered for a second (./authenticate.ts); a revocation through the service is forgotten at once.
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
  };
}

/** Authentication, API keys, workspaces and the audit log, as one area of the service. */
export function createAccessService(ctx: ServiceContext) {
  const authenticator = createAuthenticator(ctx);
  return {
    ...createAuthenticationService(ctx, authenticator),
    ...createApiKeysService(ctx, { keyChanged: (id) => authenticator.forget(id) }),
    ...createWorkspacesService(ctx),
    ...createAuditLogService(ctx),
  };
}

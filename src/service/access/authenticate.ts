/**
 * Who a bearer key is, with a short-lived cache of the answer.
 *
 * Every GraphQL request authenticates, and the lookup (hash, a round trip, a row) was a third of
 * the database round trips of a createJob. A key that authenticated is remembered for
 * KEY_CACHE_TTL_MS, keyed by its SHA-256 (the key itself is never held), so a busy client costs
 * one lookup a second instead of one per request (concurrent requests share one). What is never cached: an unknown or revoked
 * key (each such request is looked up, and refused), and `lapsedActors`, which the live streams'
 * re-check asks the database directly.
 *
 * Revocation: a key revoked through this service is forgotten when the revocation ends, so this
 * process refuses it at once. Every gateway replica forgets it too when the revocation's
 * key-change notification reaches its live hub (src/subscriptions/live-feeds.ts), which also ends the
 * key's live streams; after the hub's listener reconnects (notifications may have been missed)
 * it forgets every key. What no notification announces (a key revoked or a role changed in SQL,
 * or a process without a hub, such as a library worker) may still authenticate here for up to
 * KEY_CACHE_TTL_MS: the price of the cache.
 * `last_used_at` is refreshed as before, at most once a minute per key.
 */
import { findApiKeyByHash, touchApiKeyLastUsed } from '../../db/repositories/api-keys.js';
import type { Actor } from '../kernel/actor.js';
import type { ServiceContext } from '../kernel/context.js';
import { DomainError } from '../kernel/errors.js';
import { hashApiKey } from '../kernel/secrets.js';

/** How long an authenticated key is remembered. */
export const KEY_CACHE_TTL_MS = 1_000;
/** How many keys are remembered at most (the oldest is dropped first). */
const MAX_KEYS = 10_000;
/** How stale `last_used_at` may get before a request refreshes it. */
const LAST_USED_GRANULARITY_MS = 60_000;
const KEY_SHAPE = /^jg_[A-Za-z0-9_-]{20,100}$/;

export class UnauthenticatedError extends DomainError {
  override name = 'UnauthenticatedError';
  constructor(message = 'a valid API key is required: send "Authorization: Bearer <key>"') {
    super('UNAUTHENTICATED', message);
  }
}

interface Remembered {
  actor: Actor;
  /** performance.now() when it was read. */
  readAt: number;
  /** Date.now() of the last `last_used_at` known written. */
  lastUsed: number;
}

export interface Authenticator {
  /**
   * Who a bearer key is. Throws UNAUTHENTICATED for a missing, unknown or revoked key, with the
   * same message for each. Records `last_used_at` (at most once a minute per key).
   */
  authenticate(key: string | undefined | null): Promise<Actor>;
  /**
   * Forgets what is remembered of this key (call once a change to it has committed), or of
   * every key (undefined: changes may have been missed).
   */
  forget(keyId: string | undefined): void;
}

export function createAuthenticator(ctx: Pick<ServiceContext, 'db' | 'keyCacheMs'>): Authenticator {
  const ttlMs = ctx.keyCacheMs ?? KEY_CACHE_TTL_MS;
  const remembered = new Map<string, Remembered>();
  // The lookup under way for a key, which requests for it that arrive meanwhile share: when a
  // busy key's entry lapses, its fifty concurrent requests make one lookup, not fifty.
  const pending = new Map<string, Promise<Actor>>();
  // Bumped by every forget: a lookup that began before one does not remember what it read,
  // which may be the key as it was before the change.
  let generation = 0;

  async function lookUp(hash: string, bytes: Buffer): Promise<Actor> {
    const started = generation;
    const row = await findApiKeyByHash(ctx.db, bytes);
    if (!row || row.revoked_at) throw new UnauthenticatedError();
    let lastUsed = row.last_used_at?.getTime() ?? 0;
    if (Date.now() - lastUsed > LAST_USED_GRANULARITY_MS) {
      await touchApiKeyLastUsed(ctx.db, row.id);
      lastUsed = Date.now();
    }
    const actor: Actor = {
      workspaceId: row.workspace_id,
      kind: 'user',
      role: row.role,
      keyId: row.id,
      installationAdmin: row.installation_admin,
    };
    if (started === generation) {
      if (remembered.size >= MAX_KEYS) remembered.delete(remembered.keys().next().value!);
      remembered.set(hash, { actor, readAt: performance.now(), lastUsed });
    }
    return actor;
  }

  return {
    async authenticate(key) {
      if (!key || !KEY_SHAPE.test(key)) throw new UnauthenticatedError();
      const bytes = hashApiKey(key);
      const hash = bytes.toString('base64');
      const hit = remembered.get(hash);
      if (!hit || performance.now() - hit.readAt >= ttlMs) {
        remembered.delete(hash);
        let lookup = pending.get(hash);
        if (!lookup) {
          lookup = lookUp(hash, bytes).finally(() => pending.get(hash) === lookup && pending.delete(hash));
          pending.set(hash, lookup);
        }
        return { ...(await lookup) };
      }
      if (Date.now() - hit.lastUsed > LAST_USED_GRANULARITY_MS) {
        hit.lastUsed = Date.now();
        await touchApiKeyLastUsed(ctx.db, hit.actor.keyId!);
      }
      return { ...hit.actor };
    },
    forget(keyId) {
      generation++;
      // A lookup under way may have read the key before the change: later requests make their own.
      pending.clear();
      if (keyId === undefined) return remembered.clear();
      for (const [hash, r] of remembered) if (r.actor.keyId === keyId) remembered.delete(hash);
    },
  };
}

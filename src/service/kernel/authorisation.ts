/**
 * The role rules: which role an action needs (VIEWER < OPERATOR < ADMIN), and what an OPERATOR
 * key may change. Every mutation checks its role through the audited mutation boundary
 * (./audited-mutation.ts); reads that need a role check it here.
 */
import type { Actor, Role } from './actor.js';
import { ForbiddenError } from './errors.js';

const RANK: Record<Role, number> = { VIEWER: 1, OPERATOR: 2, ADMIN: 3 };

export function hasRole(actor: Actor, needed: Role): boolean {
  return RANK[actor.role] >= RANK[needed];
}

/** Throws FORBIDDEN unless the actor's role is at least `needed`. */
export function requireRole(actor: Actor, needed: Role, what: string): void {
  if (!hasRole(actor, needed)) throw new ForbiddenError(`${what} needs the ${needed} role; this key is ${actor.role}`);
}

/**
 * OPERATOR keys may change only what their own key created (or what was created on their
 * behalf); ADMIN may change anything in the workspace.
 */
export function requireOwnership(actor: Actor, createdByKeyId: string | null, what: string): void {
  const refusal = ownershipRefusal(actor, createdByKeyId, what);
  if (refusal) throw refusal;
}

/** Whether the actor may change what any key created: an ADMIN, or jobgate itself. */
export function mayChangeAny(actor: Actor): boolean {
  return actor.role === 'ADMIN' || actor.kind === 'system';
}

/** The refusal requireOwnership throws, or undefined when the actor may change it. */
export function ownershipRefusal(actor: Actor, createdByKeyId: string | null, what: string): ForbiddenError | undefined {
  if (mayChangeAny(actor)) return undefined;
  if (actor.keyId && createdByKeyId === actor.keyId) return undefined;
  return new ForbiddenError(`an OPERATOR key may change only what it created; ${what} was created by another key`);
}

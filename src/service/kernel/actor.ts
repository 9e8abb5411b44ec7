/**
 * Who is calling. Every service function takes an actor, and every query it runs is scoped
 * to `actor.workspaceId`: there is no unscoped path.
 */
export type Role = 'ADMIN' | 'OPERATOR' | 'VIEWER';

export interface Actor {
  workspaceId: string;
  /**
   * `user`: a client of the GraphQL API; `library`: the embedding application, in process;
   * `system`: jobgate itself (the only one that may touch INTERNAL endpoints and their jobs).
   */
  kind: 'user' | 'library' | 'system';
  role: Role;
  /** The API key acting (or acted for), when there is one. */
  keyId?: string | undefined;
  /** May create workspaces. */
  installationAdmin?: boolean | undefined;
  /**
   * `replica`: this call's lists, counts and stats may come from the read replica while it is
   * within its staleness bound (a GraphQL query of a key that wrote nothing lately); otherwise,
   * and always when unset, every read is the primary's.
   */
  reads?: 'replica' | undefined;
}

export function isSystem(actor: Actor): boolean {
  return actor.kind === 'system';
}

/**
 * Whether the actor administers the installation (may create workspaces, revoke installation-admin
 * keys): jobgate itself; the embedding application, which owns the database, unless it acts on
 * behalf of an API key (then that key's standing counts); installation-admin keys.
 */
export function isInstallationAdmin(actor: Actor): boolean {
  return actor.kind === 'system' || (actor.kind === 'library' && !actor.keyId) || actor.installationAdmin === true;
}

/**
 * Whether the actor sees the installation's own details (where workers run, handler error
 * text): jobgate itself, the embedding application and installation-admin keys do; a
 * workspace's keys do not.
 */
export function seesInstallation(actor: Actor): boolean {
  return actor.kind !== 'user' || actor.installationAdmin === true;
}

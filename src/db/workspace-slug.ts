/**
 * What a workspace's slug may be. One definition for every check in TypeScript; the schema
 * restates it in the CHECK on `workspaces.slug`, and test/db/names.test.ts fails when the two
 * part.
 */
export const WORKSPACE_SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** The rule in words, for a refusal. */
export const WORKSPACE_SLUG_RULE = 'must be lowercase letters, digits and -, up to 63 characters';

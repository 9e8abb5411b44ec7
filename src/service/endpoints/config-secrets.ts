/**
 * Who may send a config's secrets where. An HTTP endpoint renders its config into the requests it
 * sends wherever its url and headers say, so aiming an endpoint at secrets is as good as reading
 * them. The rule (docs/security.md): the url of an endpoint that uses secrets is chosen by the key
 * that set those secrets, or by an ADMIN (the key that last chose it is endpoints.aimed_by_key_id).
 * It is checked wherever it could be broken:
 *
 *  - an endpoint is pointed at a config, or re-aimed while it uses one (assertMayAimAt);
 *  - secrets are written into a config that endpoints already use (assertNoOthersAimAt): written
 *    by a key that did not aim them, the secrets would go to the url an OPERATOR chose;
 *  - a job's input names a secret (assertMayNameInInput): the body of an HTTP job is its input with
 *    `{{config.key}}` rendered, so any key that may create jobs on the endpoint could have the
 *    secret sent in a body (where the target may log it, or echo it back in a form redaction does
 *    not know, into an excerpt every VIEWER reads);
 *  - and when a request is built (src/service/engine/delivery/deliver.ts): what the checks above
 *    could not see (a database from before them, a config that gained a secret after a job was
 *    written) is not rendered.
 *
 * A secret's owner is the key that wrote it (ConfigEntry.setBy), not the config's creator: an
 * ADMIN's secret in an OPERATOR's config stays the ADMIN's.
 */
import * as configsRepo from '../../db/repositories/configs.js';
import * as endpointsRepo from '../../db/repositories/endpoints.js';
import type { Executor } from '../../db/repositories/scope.js';
import type { ConfigEntry, ConfigRow, EndpointRow } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { ConflictError, ForbiddenError } from '../kernel/errors.js';
import { configKeysIn } from './template.js';

/**
 * The key that wrote a secret entry (null: a caller without a key): its `setBy`, or, for an entry
 * written before that was kept, the config's creator.
 */
export function secretOwner(entry: ConfigEntry, configCreator: string | null): string | null {
  return entry.setBy !== undefined ? entry.setBy : configCreator;
}

/**
 * Who would send a secret: a key, and whether it is an ADMIN. `keyId` null is no key at all
 * (jobgate itself, or the embedding application acting for no key, which owns the database).
 */
export interface SecretSender {
  keyId: string | null;
  admin: boolean;
}

/** The rule: an ADMIN, or no key, may send any secret; a key only those it wrote. */
export function maySendSecret(sender: SecretSender, owner: string | null): boolean {
  return sender.admin || sender.keyId === null || sender.keyId === owner;
}

const senderOf = (actor: Actor): SecretSender => ({
  keyId: actor.kind === 'system' ? null : (actor.keyId ?? null),
  admin: actor.role === 'ADMIN',
});

/**
 * The keys that wrote the config's secrets, of every secret or of those among `only`; empty when
 * there are none.
 */
function secretOwners(config: ConfigRow, only?: Set<string>): Set<string | null> {
  const owners = new Set<string | null>();
  for (const [key, entry] of Object.entries(config.entries)) {
    if (entry.secret && (!only || only.has(key))) owners.add(secretOwner(entry, config.created_by_key_id));
  }
  return owners;
}

const maySend = (actor: Actor, owner: string | null) => maySendSecret(senderOf(actor), owner);

/** Throws FORBIDDEN when `actor` may not aim an endpoint at `config`'s secrets. */
export function assertMayAimAt(actor: Actor, config: ConfigRow): void {
  if ([...secretOwners(config)].some((owner) => !maySend(actor, owner)))
    throw new ForbiddenError(
      `an OPERATOR key may send only secrets it wrote: config "${config.name}" holds secrets another key wrote, and an endpoint sends them wherever its url and headers say`,
    );
}

/**
 * Throws CONFLICT when `actor` writes secrets into `config` while endpoints that another key (not
 * an ADMIN) aimed use it: they would send the secrets wherever that key chose.
 */
export async function assertNoOthersAimAt(ex: Executor, actor: Actor, config: ConfigRow): Promise<void> {
  if (secretOwners(config).size === 0) return;
  const names = await endpointsRepo.endpointsOfOthersUsingConfig(ex, actor.workspaceId, config.id, actor.keyId ?? null);
  if (names.length === 0) return;
  const shown = names.slice(0, 10).join(', ') + (names.length > 10 ? `, and ${names.length - 10} more` : '');
  throw new ConflictError(
    `config "${config.name}" is used by endpoints another key aimed (${shown}): they would send its secrets wherever ` +
      "that key chose. An ADMIN's update of their url or headers makes the choice its own; or point them at another " +
      'config, or archive them, before it holds secrets.',
    { endpoints: names },
  );
}

/**
 * Throws FORBIDDEN when a job's `input` for `endpoint` names (`{{config.key}}`) a secret of the
 * endpoint's config that `actor` may not aim an endpoint at (assertMayAimAt's rule).
 */
export async function assertMayNameInInput(ex: Executor, actor: Actor, endpoint: EndpointRow, input: unknown): Promise<void> {
  if (!endpoint.config_id) return;
  const named = configKeysIn(input);
  if (named.size === 0) return;
  const config = await configsRepo.findConfigById(ex, actor.workspaceId, endpoint.config_id);
  if (!config) return;
  if ([...secretOwners(config, named)].some((owner) => !maySend(actor, owner)))
    throw new ForbiddenError(
      `an OPERATOR key may send only secrets it wrote: the input names a secret of config "${config.name}" that another key wrote`,
    );
}

/**
 * Live HTTP endpoints, installation-wide, that delivery will not give their config's secrets (aimed
 * by an OPERATOR key that did not write them), as `workspace/name`, at most `limit`: what a start
 * warns of (src/composition-root.ts).
 */
export async function barredEndpoints(ex: Executor, limit: number): Promise<string[]> {
  return (await endpointsRepo.endpointsBarredFromSecrets(ex, limit)).map((e) => `${e.workspace}/${e.name}`);
}

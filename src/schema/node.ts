/**
 * The Relay `Node` interface: every object a client cache keys by id (Apollo, urql's graphcache,
 * Relay) implements it, and `node(id:)` refetches any of them by id alone. Ids are UUIDs, unique
 * across every table, so an id needs no type prefix; the lookup finds which table holds it.
 */
import type { NodeKind } from '../service/nodes.js';
import { builder } from './builder.js';

/** Which type a value returned by `node` is: set by the resolver, read by resolveType. */
const kinds = new WeakMap<object, NodeKind>();

export function asNode<T extends object>(kind: NodeKind, value: T): T {
  kinds.set(value, kind);
  return value;
}

export const NodeRef = builder.interfaceRef<{ id: string }>('Node').implement({
  description: 'An object with a globally unique id: `node(id:)` fetches it again by that id alone.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Globally unique identifier.' }),
  }),
  resolveType: (value) => kinds.get(value) ?? null,
});

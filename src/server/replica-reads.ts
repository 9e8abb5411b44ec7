/**
 * Which GraphQL operations may read from the read replica (src/db/read-replica.ts): queries, of a
 * key that has not written through this gateway within the replica's staleness bound. So a caller
 * reads its own writes: a mutation's answer, and the same key's queries for the bound after it,
 * come from the primary. Subscriptions and mutations always read the primary. The service decides
 * per read (ServiceContext.reader): only lists, counts and stats take the replica, and only while
 * it is within the bound.
 */
import { getOperationAST } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { GraphQLContext } from '../schema/builder.js';

/** Past this many keys remembered, the ones whose window has passed are forgotten. */
const SWEEP_AT = 10_000;

export function useReplicaReads(options: { windowMs: number }): Plugin<GraphQLContext> {
  // When each key last sent a mutation here (ms); a key is only here for `windowMs` after one.
  const wrote = new Map<string, number>();
  const sweep = (now: number) => {
    for (const [key, at] of wrote) if (now - at > options.windowMs) wrote.delete(key);
  };
  return {
    onExecute({ args }) {
      const context = args.contextValue as GraphQLContext;
      const actor = context.actor;
      if (!actor?.keyId) return;
      const operation = getOperationAST(args.document, args.operationName)?.operation;
      const now = Date.now();
      if (operation === 'mutation') {
        wrote.set(actor.keyId, now);
        if (wrote.size > SWEEP_AT) sweep(now);
        return;
      }
      if (operation !== 'query') return;
      const last = wrote.get(actor.keyId);
      if (last !== undefined && now - last <= options.windowMs) return;
      wrote.delete(actor.keyId);
      context.actor = { ...actor, reads: 'replica' };
    },
  };
}

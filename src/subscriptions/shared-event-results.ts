/**
 * Subscription execution that runs each event once for all the subscribers that would get the
 * same result, instead of once per subscriber.
 *
 * The hub hands one object per event to every subscription it matches (one run state to all
 * of that run's watchers, one event row to every stream it matches). GraphQL then executes the
 * subscriber's selection over it: the "ExecuteSubscriptionEvent" step of the spec. Two
 * subscribers with the same document, operation, variables and actor compute the same result
 * from the same event, because resolvers depend only on their source, their arguments and the
 * actor (they call the service with `ctx.actor`; the rest of the context carries transport
 * hooks no field reads). So the first one to reach an event executes it and the others take its
 * result; results are remembered per event object (a WeakMap: they go when the event does).
 *
 * Measured with bench/live.ts (1,000 subscribers on 10 runs, 10,000 updates/s delivered): the
 * default executor (@graphql-tools/executor, through graphql-yoga) allocated about 15 KB per
 * update delivered, mostly in per-event execution and the async iterators it wraps each event's
 * result in; that garbage was the gateway's young-generation GC and, promoted, its RSS. Shared,
 * with node's defaults: p99 17-23 ms -> 6-9 ms, RSS 205 -> 185 MB, CPU 41% -> 26% of a core.
 *
 * The source stream is graphql-js's `createSourceEventStream` (the subscription field's
 * `subscribe`), and each event runs through graphql-js's `execute`, as graphql-js's own
 * `subscribe` does. Errors of the source (a feed failing, e.g. SLOW_CONSUMER) reach the client
 * as a GraphQLError carrying the original, which the gateway's masking maps to its code.
 */
import {
  createSourceEventStream,
  execute,
  getOperationAST,
  GraphQLError,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Actor } from '../service/kernel/actor.js';
import { mapIterator } from './map-iterator.js';

type Result = ExecutionResult | Promise<ExecutionResult>;

/** Per event object, per document: results by `shareKey`. */
const results = new WeakMap<object, WeakMap<DocumentNode, Map<string, Result>>>();

/**
 * What, besides the event and the document, a result depends on. Undefined when the context has
 * no actor (then nothing is shared).
 */
function shareKey(args: ExecutionArgs): string | undefined {
  const actor = (args.contextValue as { actor?: Actor } | undefined)?.actor;
  if (!actor) return undefined;
  return JSON.stringify([
    args.operationName ?? null,
    args.variableValues ?? null,
    actor.kind,
    actor.workspaceId,
    actor.role,
    actor.keyId ?? null,
    actor.installationAdmin === true,
  ]);
}

function executeEvent(args: ExecutionArgs, key: string | undefined, event: unknown): Result {
  const run = () => execute({ ...args, rootValue: event });
  if (key === undefined || typeof event !== 'object' || event === null) return run();
  let byDocument = results.get(event);
  if (!byDocument) results.set(event, (byDocument = new WeakMap()));
  let byKey = byDocument.get(args.document);
  if (!byKey) byDocument.set(args.document, (byKey = new Map()));
  let result = byKey.get(key);
  if (result === undefined) byKey.set(key, (result = run()));
  return result;
}

export async function subscribeShared(args: ExecutionArgs): Promise<AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  const stream = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in stream)) return stream;
  const key = shareKey(args);
  const operation = getOperationAST(args.document, args.operationName);
  return mapIterator(
    stream[Symbol.asyncIterator](),
    (event) => executeEvent(args, key, event),
    (error) =>
      new GraphQLError((error as Error)?.message ?? String(error), {
        originalError: error as Error,
        nodes: operation ? [operation] : undefined,
      }),
  );
}

/** The yoga plugin that makes subscriptions (WebSocket and SSE) execute through `subscribeShared`. */
export const useSharedSubscriptionExecution = (): Plugin => ({
  onSubscribe({ setSubscribeFn }) {
    setSubscribeFn(subscribeShared as Parameters<typeof setSubscribeFn>[0]);
  },
});
